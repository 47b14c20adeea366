"""Deterministic, realistic meeting content for `seed_demo`: labels, memos, speakers, transcript
sentences and board payloads.

Pure functions over a `random.Random`: the same seed gives the same meeting, so seeding is
reproducible and a re-run can extend a workspace without changing what is already there.

Sentences are filled from templates and word lists whose picks are Zipf-weighted (the first entry
of a list is the most frequent, the tail is rare). Full-text search then meets a natural
distribution: "the", "we", "release" everywhere, "Kestrel" or "idempotency" in a few sessions.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Sequence

# ---------------------------------------------------------------------------------------------
# Word lists. Order matters: earlier entries are picked more often (weight 1 / rank^s).


class Zipf:
    """A list whose entries are drawn with weight 1 / (rank + 1) ** exponent."""

    def __init__(self, items: Sequence[str], exponent: float = 1.0) -> None:
        self.items = list(items)
        self.cum_weights = list(itertools.accumulate(1 / (rank + 1) ** exponent for rank in range(len(self.items))))

    def pick(self, rng: random.Random) -> str:
        return rng.choices(self.items, cum_weights=self.cum_weights)[0]


PEOPLE = [
    "Maya Chen", "Daniel Okafor", "Priya Raman", "Lukas Becker", "Sofia Alvarez", "James Whitfield",
    "Aiko Tanaka", "Omar Haddad", "Grace Kim", "Mateo Rossi", "Hannah Schulz", "Ethan Brooks",
    "Fatima Noor", "Lars Eriksen", "Chloe Martin", "Ravi Patel", "Nora Lindqvist", "Samuel Adeyemi",
]  # fmt: skip

CUSTOMERS = Zipf(
    ["Northwind", "Globex", "Initech", "Umbrella Health", "Stark Logistics", "Wayne Foods", "Acme Retail",
     "Soylent Labs", "Hooli", "Vandelay Imports", "Massive Dynamic", "Tyrell Systems", "Cyberdyne Freight"],
    1.2,
)  # fmt: skip

PROJECTS = Zipf(["Atlas", "Beacon", "Kestrel", "Orion", "Juniper", "Halcyon", "Quokka", "Tamarind"], 1.3)

# Rare, specific terms: each turns up in a handful of sessions at most.
RARE = Zipf(
    ["idempotency", "backpressure", "sharding", "GDPR", "SOC 2", "penetration test", "feature flag",
     "canary release", "dead letter queue", "rate limiter", "Kubernetes", "Terraform", "Snowflake",
     "Salesforce", "HubSpot", "Figma", "Zendesk", "latency budget", "cold start", "warm pool",
     "OAuth consent screen", "webhook signature", "ULID", "tsvector", "FTS5", "vacuum", "read replica",
     "circuit breaker", "SAML", "SCIM", "churn cohort", "NPS survey", "net revenue retention", "ARR bridge",
     "procurement questionnaire", "data processing agreement", "onboarding checklist", "runbook",
     "on-call rotation", "error budget", "p99", "heap dump", "memory leak", "race condition", "hotfix",
     "localization", "right-to-left layout", "accessibility audit", "screen reader", "dark mode",
     "Brazilian Portuguese", "Q4 offsite", "Lisbon", "Singapore region", "Frankfurt region"],
    1.1,
)  # fmt: skip

NOUNS = Zipf(
    ["release", "roadmap", "dashboard", "migration", "customer", "budget", "onboarding flow",
     "pricing page", "API", "search", "backlog", "launch plan", "contract", "renewal", "demo",
     "integration", "billing", "report", "test suite", "deployment", "pipeline", "design", "prototype",
     "mobile app", "checkout", "invoice", "support queue", "metrics", "forecast", "hiring plan", "survey",
     "documentation", "permissions model", "export", "notification settings", "audit log", "SLA",
     "retro notes"],
    0.9,
)  # fmt: skip

VERBS = Zipf(
    ["review", "finish", "ship", "update", "look at", "move", "prioritize", "test", "clean up", "document",
     "split", "estimate", "rewrite", "benchmark", "roll back", "simplify", "sign off on", "escalate"],
    0.9,
)  # fmt: skip

DEADLINES = Zipf(
    ["Friday", "end of the week", "next sprint", "Monday", "the end of the month", "Thursday", "the demo",
     "the board meeting", "the quarter close", "the offsite"]
)  # fmt: skip

STATES = Zipf(
    ["blocked", "in review", "on track", "behind schedule", "almost done", "waiting on legal",
     "stuck in QA", "half finished", "ready to merge"]
)  # fmt: skip

METRICS = Zipf(
    ["conversion", "signups", "churn", "latency", "retention", "support tickets", "error rate",
     "active users", "revenue", "response time", "trial activations"]
)  # fmt: skip

FINDINGS = Zipf(
    ["it looks mostly fine", "there are a couple of edge cases", "the numbers don't add up yet",
     "most of the time goes into the database", "nobody has touched it since March",
     "it's a lot simpler than we thought", "the tests are flaky", "the customer is happy with it",
     "we need another pass on the copy", "it only breaks with large accounts"]
)  # fmt: skip

TIME_REFS = Zipf(["last week", "the last release", "January", "the redesign", "the price change", "the outage"])

FILLERS = ["Um, ", "Uh, ", "So, ", "Yeah, ", "I mean, ", "Okay, ", "Right, ", "Well, "]
SPOKEN_FILLERS = ("Um, ", "Uh, ", "I mean, ")  # dropped in the final revision

# Templates use {slot} names filled by `_Slots`; repeated slot names get independent picks.
SENTENCES = Zipf(
    [
        "I think we should {verb} the {noun} before {deadline}.",
        "Can we {verb} the {noun} by {deadline}?",
        "The {noun} is {state}, so we might need to push it.",
        "{name}, do you have an update on the {noun}?",
        "I looked at the {noun} yesterday and {finding}.",
        "We saw about {number} percent {direction} in {metric} since {time_ref}.",
        "Let's take that offline and {verb} the {noun} separately.",
        "My concern is that the {noun} depends on the {noun2}.",
        "Okay, so the action item is for {name} to {verb} the {noun}.",
        "That makes sense to me.",
        "Sorry, you cut out for a second there.",
        "Could you share your screen?",
        "From the {customer} side, they mostly care about the {noun}.",
        "{customer} asked again about the {rare}.",
        "We talked about the {rare} in the last meeting, but nothing happened.",
        "For {project}, the {noun} is the main risk right now.",
        "I'd rather not {verb} the {noun} until we understand the {rare}.",
        "Do we have numbers on {metric} for {customer}?",
        "Honestly I don't think the {noun} is the problem.",
        "Let me check with {name} and get back to you.",
        "We agreed to {verb} the {noun} first and revisit the {noun2} later.",
        "Who owns the {noun} now that {name} moved teams?",
        "The {project} team is {state} on the {noun}.",
        "If we {verb} the {noun} now, the {noun2} slips to {deadline}.",
        "Good point.",
        "I can take that one.",
        "Can everyone see the {noun}?",
        "Just to recap, we're going to {verb} the {noun} and {verb2} the {noun2}.",
        "There's a question in the chat about the {rare}.",
        "We should add a section on the {rare} to the {noun} doc.",
    ],
    0.6,
)

DIRECTIONS = ["increase", "drop"]


class _Slots(dict):
    """`str.format_map` source that draws a fresh word for every slot it is asked for."""

    def __init__(self, rng: random.Random, people: Sequence[str]) -> None:
        super().__init__()
        self.rng = rng
        self.people = people

    def __missing__(self, key: str) -> str:
        rng = self.rng
        if key in ("noun", "noun2"):
            return NOUNS.pick(rng)
        if key in ("verb", "verb2"):
            return VERBS.pick(rng)
        if key == "name":
            return rng.choice(self.people).split()[0]
        if key == "number":
            return str(rng.randint(2, 40))
        if key == "direction":
            return rng.choice(DIRECTIONS)
        return {
            "deadline": DEADLINES,
            "state": STATES,
            "metric": METRICS,
            "finding": FINDINGS,
            "time_ref": TIME_REFS,
            "customer": CUSTOMERS,
            "project": PROJECTS,
            "rare": RARE,
        }[key].pick(rng)


def sentence(rng: random.Random, people: Sequence[str]) -> str:
    text = SENTENCES.pick(rng).format_map(_Slots(rng, people))
    return text[0].upper() + text[1:]


_PROPER_STARTS = frozenset(
    ["I", "I'd", "I'm"]
    + [p.split()[0] for p in PEOPLE]
    + [c.split()[0] for c in CUSTOMERS.items]
    + PROJECTS.items
    + [r.split()[0] for r in RARE.items if r[0].isupper()]
)


def lower_first(text: str) -> str:
    """Lower-case the first word for a sentence continued after a filler, unless it is a name."""
    first = text.split(" ", 1)[0].rstrip(",.?")
    return text if first in _PROPER_STARTS else text[0].lower() + text[1:]


# ---------------------------------------------------------------------------------------------
# Meetings.

MEETING_KINDS = [
    ("Weekly product sync", "Standing agenda: launches, metrics, open questions."),
    ("Engineering standup", None),
    ("{customer} quarterly business review", "Renewal is due next quarter; bring usage numbers."),
    ("Customer interview: {customer}", "Recording consent given at the start of the call."),
    ("{project} roadmap review", "Decide what makes the cut for the next release."),
    ("Incident postmortem: {noun} outage", "Blameless format. Timeline first, then follow-ups."),
    ("Design review: {noun}", "Figma link in the calendar invite."),
    ("Sales pipeline review", "Focus on deals closing this month."),
    ("Hiring debrief: senior backend engineer", "Scorecards are due before the debrief."),
    ("1:1 {first} / {second}", None),
    ("Marketing campaign planning", "Budget and channels for the spring campaign."),
    ("Sprint planning", None),
    ("All hands", "Q&A at the end; questions can be sent in advance."),
]


@dataclass
class SegmentSpec:
    start_ms: int
    end_ms: int
    speaker: str
    text: str
    confidence: float


@dataclass
class Meeting:
    label: str
    memo: str | None
    people: list[str]
    segments: list[SegmentSpec] = field(default_factory=list)

    @property
    def duration_ms(self) -> int:
        return self.segments[-1].end_ms if self.segments else 0


def meeting(rng: random.Random, segment_count: int) -> Meeting:
    people = rng.sample(PEOPLE, rng.randint(2, 6))
    label_template, memo = MEETING_KINDS[rng.randrange(len(MEETING_KINDS))]
    label = label_template.format(
        customer=CUSTOMERS.pick(rng),
        project=PROJECTS.pick(rng),
        noun=NOUNS.pick(rng),
        first=people[0].split()[0],
        second=people[1].split()[0],
    )
    if rng.random() < 0.25:
        memo = None
    elif memo is not None and rng.random() < 0.3:
        memo += " " + sentence(rng, people)
    label = label[0].upper() + label[1:]
    result = Meeting(label=label, memo=memo, people=people)

    # A few people do most of the talking; each turn is one to three sentences.
    talk_weights = [1 / (i + 1) for i in range(len(people))]
    clock = rng.randint(500, 4000)
    speaker = people[0]
    for _ in range(segment_count):
        if rng.random() < 0.6:
            speaker = rng.choices(people, weights=talk_weights)[0]
        text = " ".join(sentence(rng, people) for _ in range(rng.choice((1, 1, 1, 2, 2, 3))))
        if rng.random() < 0.2:
            text = rng.choice(FILLERS) + lower_first(text)
        duration = int(len(text.split()) * rng.uniform(330, 480))  # ~2.5 words a second
        result.segments.append(
            SegmentSpec(
                start_ms=clock,
                end_ms=clock + duration,
                speaker=speaker,
                text=text,
                confidence=round(rng.uniform(0.62, 0.99), 3),
            )
        )
        clock += duration + rng.randint(150, 2500)
    return result


_SPOKEN_FILLER = re.compile(r"^(?:%s)" % "|".join(re.escape(f) for f in SPOKEN_FILLERS))


def final_revision(rng: random.Random, committed: Sequence[SegmentSpec]) -> list[SegmentSpec]:
    """The post-recording revision: hesitations removed, some same-speaker turns merged."""
    final: list[SegmentSpec] = []
    for seg in committed:
        text = _SPOKEN_FILLER.sub("", seg.text)
        text = text[0].upper() + text[1:]
        if final and final[-1].speaker == seg.speaker and rng.random() < 0.5:
            last = final[-1]
            final[-1] = SegmentSpec(last.start_ms, seg.end_ms, last.speaker, f"{last.text} {text}", last.confidence)
            continue
        final.append(SegmentSpec(seg.start_ms, seg.end_ms, seg.speaker, text, round(rng.uniform(0.9, 0.995), 3)))
    return final


# ---------------------------------------------------------------------------------------------
# Boards.

BOARD_IDS = ("summary", "action-items", "decisions")


def board_payload(rng: random.Random, board_id: str, m: Meeting, ended: date) -> dict:
    if board_id == "summary":
        return {
            "title": m.label,
            "overview": " ".join(sentence(rng, m.people) for _ in range(3)),
            "keyPoints": [sentence(rng, m.people) for _ in range(rng.randint(3, 6))],
            "participants": sorted(m.people),
            "sentiment": rng.choice(["positive", "neutral", "mixed"]),
        }
    if board_id == "action-items":
        return {
            "items": [
                {
                    "id": f"ai-{n + 1}",
                    "text": f"{VERBS.pick(rng).capitalize()} the {NOUNS.pick(rng)}"
                    + (f" for {CUSTOMERS.pick(rng)}" if rng.random() < 0.3 else ""),
                    "owner": rng.choice(m.people),
                    "due": (ended + timedelta(days=rng.randint(1, 21))).isoformat(),
                    "done": rng.random() < 0.2,
                }
                for n in range(rng.randint(1, 6))
            ]
        }
    if board_id == "decisions":
        return {
            "decisions": [
                {
                    "text": f"We will {VERBS.pick(rng)} the {NOUNS.pick(rng)} before {DEADLINES.pick(rng)}.",
                    "decidedBy": sorted(rng.sample(m.people, min(len(m.people), rng.randint(1, 3)))),
                    "timestampMs": rng.randint(0, max(m.duration_ms, 1)),
                }
                for _ in range(rng.randint(0, 4))
            ]
        }
    raise ValueError(f"unknown board {board_id}")
