from django.urls import path

from apps.webhooks import api

urlpatterns = [
    path("webhooks", api.EndpointListApi.as_view()),
    path("webhooks/<str:id>", api.EndpointDetailApi.as_view()),
    path("webhooks/<str:id>/test", api.EndpointTestApi.as_view()),
    path("webhooks/<str:id>/recover", api.EndpointRecoverApi.as_view()),
    path("webhooks/<str:id>/rotate-secret", api.EndpointRotateSecretApi.as_view()),
    path("webhook-deliveries", api.DeliveryListApi.as_view()),
    path("webhook-deliveries/<str:id>", api.DeliveryDetailApi.as_view()),
    path("webhook-deliveries/<str:id>/replay", api.DeliveryReplayApi.as_view()),
]
