from __future__ import annotations

from django import forms
from oauth2_provider.forms import AllowForm


class ConsentForm(AllowForm):
    """DOT's consent form plus the workspace the token will be bound to. The choices are the
    member's own active memberships, so a forged value is simply invalid."""

    workspace = forms.ChoiceField(required=False, widget=forms.RadioSelect)

    def __init__(self, *args, memberships=(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.memberships = {m.workspace_id: m for m in memberships}
        self.fields["workspace"].choices = [(m.workspace_id, m.workspace.name) for m in memberships]
        if len(self.memberships) == 1:
            self.fields["workspace"].initial = next(iter(self.memberships))

    def chosen_membership(self):
        return self.memberships.get(self.cleaned_data.get("workspace"))
