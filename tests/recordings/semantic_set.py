"""A small labelled set for search by meaning: meeting-like transcripts written for it, questions
phrased the way people type them (mostly without the words the meeting used), and the segments
that answer each. tests/recordings/test_semantic_quality.py and bench/semantic.py read it."""

MEETINGS = {
    "Budget review": [
        "Okay, let's start with the numbers for the offsite.",
        "Finance came back and said we can't spend more than forty thousand this quarter.",
        "That covers travel, the venue and the catering together.",
        "Priya, can you check whether the hotel quote includes breakfast?",
        "Sure, I'll email them this afternoon.",
        "If we go over, the difference comes out of next quarter's marketing line.",
        "I'd rather cut the boat trip than touch marketing.",
        "Agreed, the boat trip is off the agenda then.",
        "Let's meet again on Thursday to sign off the final plan.",
        "Thanks everyone, talk soon.",
    ],
    "Hiring sync": [
        "We have three candidates left for the backend role.",
        "Marco did really well in the system design interview.",
        "His take-home had no tests though, which worries me a little.",
        "Let's make him an offer and pair him with a senior engineer for the first month.",
        "The salary band for that level tops out at ninety-five.",
        "HR says the start date could be the first of March at the earliest.",
        "For the frontend role we still haven't found anyone good.",
        "Maybe we should ask the agency to widen the search to other cities.",
        "Or we allow fully remote work for that position.",
        "I'll draft the job post again with remote allowed.",
    ],
    "Incident retrospective": [
        "The outage on Saturday lasted about two hours.",
        "It started when the database ran out of disk space during the nightly backup.",
        "Nobody was paged because the alert went to an old mailing list.",
        "We need the disk usage alert to page whoever is on call.",
        "Customers saw error pages on checkout for most of that time.",
        "Support got around three hundred tickets by Sunday morning.",
        "Action item: move backups to a separate volume.",
        "Second action item: run a restore drill every month.",
        "Jonas will write the public postmortem by Wednesday.",
        "Let's not blame anyone, the process failed, not a person.",
    ],
    "Product roadmap": [
        "For the next release the main theme is offline mode on mobile.",
        "Sales keeps asking for single sign-on, big customers won't buy without it.",
        "We'll put single sign-on in the release after this one.",
        "Dark mode is nice to have but it slips to the end of the year.",
        "The analytics dashboard redesign needs more user interviews first.",
        "Lena is running five interviews with power users next week.",
        "We're dropping the legacy export format in June.",
        "Customers on the old format get an email three months ahead.",
        "Pricing stays the same for this cycle.",
        "The beta for offline mode opens to twenty customers in April.",
    ],
    "Customer call with Northwind": [
        "Thanks for joining, we wanted to hear how the rollout is going.",
        "Honestly the team loves it, but the import from the old tool was painful.",
        "It took us almost a week to move our historical records over.",
        "Their main complaint is that reports load slowly in the afternoon.",
        "They'd like to renew, but only if we can give them a ten percent discount.",
        "I can't promise the discount today, I'll check with my manager.",
        "They also asked whether we support exporting to their data warehouse.",
        "We could set up a weekly export for them as a pilot.",
        "Next check-in is in a month.",
        "I'll send a summary of this call by tomorrow.",
    ],
    "Office move planning": [
        "The lease on the current office ends in September.",
        "The new building is ten minutes from the train station.",
        "Movers need the final floor plan two weeks before the move.",
        "We're getting standing desks for everyone who wants one.",
        "The kitchen will be bigger, with a proper coffee machine.",
        "Parking is limited, so we'll subsidise public transport passes.",
        "IT has to move the servers on a weekend to avoid downtime.",
        "Each team gets a quiet room for focused work.",
        "People can work from home during the move week.",
        "Let's announce the new address at the all-hands.",
    ],
}

# (question, [(meeting, segment index), ...] that answer it)
QUESTIONS = [
    ("What did we decide about the budget?", [("Budget review", 1)]),
    ("what is the spending limit for the offsite", [("Budget review", 1)]),
    ("which activity was cancelled to save money", [("Budget review", 6), ("Budget review", 7)]),
    ("Are we hiring Marco?", [("Hiring sync", 3)]),
    ("maximum pay for the backend engineer", [("Hiring sync", 4)]),
    ("when can the new hire begin", [("Hiring sync", 5)]),
    ("why did the site go down", [("Incident retrospective", 1)]),
    ("why wasn't anyone woken up by the alarm", [("Incident retrospective", 2)]),
    ("what follow-ups came out of the outage", [("Incident retrospective", 6), ("Incident retrospective", 7)]),
    ("when do we ship SSO", [("Product roadmap", 2)]),
    ("is the price changing", [("Product roadmap", 8)]),
    ("which file format are we removing", [("Product roadmap", 6)]),
    ("does Northwind want a price reduction to renew", [("Customer call with Northwind", 4)]),
    ("what performance problem did the customer report", [("Customer call with Northwind", 3)]),
    ("when do we leave the old office", [("Office move planning", 0)]),
    ("how will people get to work without parking", [("Office move planning", 5)]),
    ("offline mode beta", [("Product roadmap", 9)]),
    ("disk space backup", [("Incident retrospective", 1)]),
]


# --- What the semantic tests share ------------------------------------------------------------

import pytest  # noqa: E402

from apps.recordings.semantic import installed  # noqa: E402

needs_extra = pytest.mark.skipif(not installed(), reason="requirements/semantic.txt is not installed")


@pytest.fixture
def semantic_on(settings):
    """Search by meaning turned on, and no process cache left from another test's database."""
    from apps.recordings.semantic import index

    from apps.recordings.semantic.embedders import current

    settings.CONNECT_SEMANTIC_SEARCH = True
    current()  # loaded once per test process, before any timed task or request
    index.forget()
    yield
    index.forget()


def embed_everything() -> int:
    """What the backfill command does, without its progress bar: every segment gets a vector."""
    from apps.recordings.semantic.embedders import current
    from apps.recordings.semantic.writer import embed, pending_after

    embedder, after, written = current(), "", 0
    while True:
        pending, after = pending_after(after, embedder.name, 512)
        if after is None:
            return written
        written += embed(pending, embedder)
