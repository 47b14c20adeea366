import re

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "apps.core"

    def ready(self) -> None:
        from corsheaders.signals import check_request_enabled

        # sqlite and deadlines connect SQLite's WAL and deadline handlers on import.
        from apps.core.cors import URLS_REGEX
        from apps.core.errors import Unavailable, send_error
        from apps.core.origins import allowed_origin
        from engine import deadlines, forking, lanes, sqlite, taskcluster  # noqa: F401

        bearer_only = re.compile(URLS_REGEX)

        def cors_allowed(sender, request, **kwargs) -> bool:  # noqa: ARG001 - signal
            # django-cors-headers asks this for origins it does not list itself (it lists none):
            # the origin policy decides, and only on the Bearer-only paths.
            origin = request.headers.get("origin")
            return bool(origin and bearer_only.match(request.path_info) and allowed_origin(origin))

        check_request_enabled.connect(cors_allowed, weak=False, dispatch_uid="connect-cors-policy")
        forking.register()
        taskcluster.install()

        shed = Unavailable(retry_after=lanes.SHED_RETRY_AFTER_SECONDS)

        async def send_shed(send) -> None:
            await send_error(send, shed)

        lanes.answer_shed_with(send_shed)
