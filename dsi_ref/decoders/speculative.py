"""Speculative inference ("SI"; Leviathan et al. 2023, Chen et al. 2023), as a step-wise run.

Each iteration of `SIRun` is the algorithm's steps, one method each:

1. `SIRun.window`: how many tokens to draft, ``m = min(k, remaining − 1)`` (room for a bonus);
2. `SIRun.draft`: the drafter drafts ``m`` tokens autoregressively, ``x_j ~ q(· | prefix, x_<j)``
   (fewer if it drafts EOS);
3. `SIRun.score`: one target forward over prefix + drafts gives ``p`` at the ``m + 1`` positions;
4. `SIRun.verify`: the drafts are decided left to right with the rule of
   `dsi_ref.decoders.verification`; the accepted ones are committed, the first rejected one is
   replaced by a residual token, and the iteration stops there (or at EOS);
5. `SIRun.bonus`: if every draft was accepted, a bonus token is drawn from ``p`` at the last
   position.

An iteration therefore commits between 1 and ``m + 1`` tokens and costs ``m·c + 1`` on the virtual
clock (docs/paper.md). With no drafter the window is empty and an iteration is one target forward
and one bonus token: non-SI (`dsi_ref.decoders.autoregressive` runs it that way).

Two seams let a variant change *how* a step runs without rewriting the loop: `SIRun.model_rows`
is the one place where a model is called, and `SIRun.forward`, `SIRun.record_commit` and
`SIRun.result` are the clock and the trace. The torch engine (`dsi_ref.backends.engine`) overrides
the seams (cached sessions, wall-clock seconds); the zoo's structural mutants (`dsi_ref.audit.zoo`)
override one step each.

The run is its state (`SIState`) and one loop (`SIRun.run` over `SIRun.iterate`'s steps). Under
the exact checker (`dsi_ref.base.exact_hooks`) the loop offers a merge point at the top of each
iteration, and a resumable run (`SIRun`'s own code, a built-in rule) a resume point between the
steps of an iteration (`SIRun.point`): the checker snapshots and restores the fields itself. Such
a run, without EOS and for a token rule, draws each draft only once the one before it is accepted
(`SIState.lazy`, `SIRun.draw`): the same steps, their draws in another order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import ClassVar, Literal

from ..base.errors import InvalidParameterError
from ..base.exact_hooks import CLOCK, COMMITTED, DERIVED, HISTORY, Checkpointing, exact_hooks
from ..base.latency import Latency, Time
from ..base.models import LanguageModel, Number, Prefix
from ..base.randomness import Randomness
from ..base.result import Event, Run
from ..base.validate import check_int
from .common import (
    DEFAULT_LATENCY,
    check_inputs,
    check_record,
    cost_laws,
    forward_cost,
    model_reader,
    reuse_config,
)
from .stepping import built_parts, overridden, stateless_rule, with_built
from .verification import Decision, Rule, VerifyRule, as_rule, decide_window, is_window_rule

__all__ = ["NON_SI_STATS", "STATS", "ModelName", "Rows", "SIRun", "SIState", "SpeculativeConfig",
           "speculative"]

#: The counters of an SI run (`Run.stats`).
STATS = ("iterations", "drafts", "accepted", "rejected", "bonus", "target_forwards",
         "drafter_forwards")
#: The counters of a run without a drafter (non-SI).
NON_SI_STATS = ("target_forwards", "bonus")

ModelName = Literal["drafter", "target"]
#: Next-token rows of one forward: ``rows[i]`` is a distribution over the vocabulary.
Rows = Sequence[Sequence[Number]]

#: Where a run is at the merge point at the top of its loop, and at the resume point before the
#: bonus token.
_TOP: tuple[object, ...] = ("top",)
_BONUS: tuple[object, ...] = ("bonus",)


@dataclass(frozen=True)
class SpeculativeConfig:
    """Parameters of SI, validated on construction.

    Args:
        lookahead: drafts per iteration (``k`` in docs/paper.md), ``>= 1``.
        verify: ``"rejection"``, ``"exact_match"``, ``"greedy"``, or a `Rule` object.
        latency: forward costs on the virtual clock.
        record: keep the trace and the counters (default). ``False`` gives a lean run (empty
            ``trace`` and ``stats``) whose exact enumeration merges paths with different
            histories; the law of ``tokens`` and ``time`` is the same.
        keep_time: return the virtual time (default). ``False`` (with ``record=False``) returns
            ``Run.time`` as NaN and merges paths that reach the same tokens at different
            times: use it when only ``tokens`` matter.
    """

    lookahead: int
    verify: VerifyRule | Rule = "rejection"
    latency: Latency = field(default_factory=Latency)
    record: bool = True
    keep_time: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "lookahead", check_int("lookahead", self.lookahead))
        try:
            as_rule(self.verify)
        except (TypeError, ValueError) as error:
            raise InvalidParameterError(str(error)) from None
        if not isinstance(self.latency, Latency):
            raise InvalidParameterError("latency must be a dsi_ref.Latency")
        check_record(self.record, self.keep_time)


def _first_flags() -> dict[str, bool]:
    return {"drafter": True, "target": True}


@dataclass(eq=False, repr=False)
class SIState:
    """Everything an SI run changes as it goes: the fields of `SIRun`.

    The exact checker snapshots and restores these fields and reads its merge states from them
    (`dsi_ref.audit.exact.state`), each by its role (`dsi_ref.base.exact_hooks`): the clock; the
    committed tokens; what only the result reads (the trace, the counters); what `SIRun`'s own
    code keeps as a function of the rest (``q`` and ``p`` at the drafts). Each value is immutable
    or a container the run changes, of values it never changes in place.

    Attributes:
        tokens: the committed tokens.
        done: EOS is committed.
        time: the virtual clock.
        first: per model, whether it made no forward yet (its first costs TTFT).
        trace, stats: the trace and the counters.
        start: the first position the iteration decides (``len(tokens)`` when it began).
        context: the generated tokens before the next draft (committed + drafts).
        drafts, draft_rows: the iteration's drafts ``x_j`` and ``q`` at each.
        target_rows: ``p`` at the positions ``start .. start + len(drafts)``.
        step: where the run is in an iteration (``None``: between iterations, or at a step
            without a resume point), kept in a snapshot so that a restored run goes on from
            there.
        resuming: the run offers the exact checker resume points (set when it starts).
        lazy: the run draws each draft only when it is decided (`SIRun.draw`; set when it
            starts).
    """

    tokens: list[int] = field(default_factory=list, metadata=COMMITTED)
    done: bool = False
    time: Time = field(default=Fraction(0), metadata=CLOCK)
    first: dict[str, bool] = field(default_factory=_first_flags)
    trace: list[Event] = field(default_factory=list, metadata=HISTORY)
    stats: dict[str, int] = field(default_factory=dict, metadata=HISTORY)
    start: int = 0
    context: tuple[int, ...] = ()
    drafts: list[int] = field(default_factory=list)
    draft_rows: list[Sequence[Number]] = field(default_factory=list, metadata=DERIVED)
    target_rows: Rows = field(default=(), metadata=DERIVED)
    step: tuple[object, ...] | None = None
    resuming: bool = False
    lazy: bool = False


class SIRun(SIState):
    """One run of SI: its state (the fields of `SIState`) and the steps of the algorithm as
    methods.

    Public so that variants override one step (the zoo's mutants) or the seams (the torch
    engine: `model_rows`, `forward`, `record_commit`, `result`); use `speculative` to run it.
    Every attribute its ``__init__`` sets besides the fields is a part it is built on
    (`built_on`).

    Args:
        target: the target model (``p``).
        drafter: the drafter (``q``); ``None`` runs non-SI (an empty window every iteration,
            ``config.lookahead`` unused, and only the counters of `NON_SI_STATS`).
        prompt: the validated prompt (`dsi_ref.decoders.common.check_inputs`).
        max_new_tokens: ``N``, the budget of generated tokens.
        rng: every random draw (keyed; see `dsi_ref.decoders.verification`).
        config: ``k``, the rule and the latencies.
    """

    #: Whether the class is `SIRun`'s own code: it replaces none of its methods (set for each
    #: subclass when it is made).
    own_code: ClassVar[bool] = True
    #: Whether the class's `iterate` is `SIRun`'s, which resets the per-iteration fields before
    #: any step reads them: they are dead between iterations.
    own_iterate: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.own_code = not overridden(cls, SIRun)
        cls.own_iterate = cls.iterate is SIRun.iterate

    def __init__(self, target: LanguageModel, drafter: LanguageModel | None, prompt: Prefix,
                 max_new_tokens: int, rng: Randomness, config: SpeculativeConfig) -> None:
        self.target, self.drafter, self.prompt = target, drafter, prompt
        self.n, self.rng, self.cfg = max_new_tokens, rng, config
        self.eos = target.eos
        self.rule: Rule = as_rule(config.verify)
        self.lookahead = config.lookahead if drafter is not None else 0
        self.stat_names = STATS if drafter is not None else NON_SI_STATS
        readers: dict[str, Callable[[Prefix], tuple[Number, ...]]] = {
            "target": model_reader(target)}
        if drafter is not None:
            readers["drafter"] = model_reader(drafter)
        #: the models' readers by name (read only: a part is rebound, not changed in place)
        self.readers: Mapping[str, Callable[[Prefix], tuple[Number, ...]]] = \
            MappingProxyType(readers)
        self._laws = (config.latency, cost_laws(config.latency))
        self._hooks = exact_hooks(rng)
        self._built = built_parts(self)
        super().__init__()
        self.stats = dict.fromkeys(STATS, 0)

    # -- the steps of one iteration ------------------------------------------------------------
    def window(self) -> int:
        """How many tokens to draft this iteration: ``min(k, remaining − 1)``, which leaves room
        for the bonus token (0 without a drafter); ``remaining`` counts from ``start``, the
        iteration's first position, so it stays the same while the iteration commits."""
        return min(self.lookahead, self.n - self.start - 1)

    def draft(self) -> None:
        """The drafter's forwards: ``x_j ~ q(· | prefix, x_<j)`` for ``j < window()``; nothing is
        drafted past a drafted EOS. A resume point comes before each draft but the first. A
        ``lazy`` run puts the forwards on the clock only: `verify` draws each draft."""
        window = self.window()
        if self.lazy:
            for j in range(window):
                self.advance("drafter", "draft", (self.start + j,))
            self.stats["drafts"] += window
            self.stats["drafter_forwards"] += window
            return
        for j in range(len(self.drafts), window):  # a restored run goes on from its draft
            if j:
                self.point(("draft", j))
            row = self.forward("drafter", "draft", (self.start + j,), self.context, 1)[0]
            if self.add_draft(row) == self.eos:
                break
        self.stats["drafts"] += len(self.drafts)
        self.stats["drafter_forwards"] += len(self.drafts)

    def add_draft(self, row: Sequence[Number]) -> int:
        """Draw the next draft from ``q = row`` after ``context`` and append it (its row, the
        context); return it."""
        context = self.context
        x = self.rule.draft(row, self.rng, context)
        self.drafts.append(x)
        self.draft_rows.append(row)
        self.context = context + (x,)
        return x

    def score(self) -> None:
        """One target forward over prefix + drafts: ``p`` at each of the ``len(drafts) + 1``
        positions ``start .. start + len(drafts)`` (a ``lazy`` run: on the clock only, over the
        ``window()`` drafts to come; `verify` reads each row when it needs it)."""
        count = (self.window() if self.lazy else len(self.drafts)) + 1
        kind = "verify" if count > 1 else "forward"
        positions = tuple(range(self.start, self.start + count))
        if self.lazy:
            self.advance("target", kind, positions)
        else:
            self.target_rows = self.forward("target", kind, positions, self.context, count)
        self.stats["target_forwards"] += 1

    def verify(self) -> bool:
        """Decide the drafts left to right against ``p``; stop at the first rejection (its
        position gets the residual token) or at EOS. True when every draft was accepted, so
        that the position after them gets a bonus token. A `WindowRule` (block verification)
        decides the window as a whole instead (`verify_window`). A resume point comes before
        each decision; a ``lazy`` run draws each draft right before it (`draw`), after a resume
        point of its own, and reads ``p`` after the drafts once they are all accepted."""
        if is_window_rule(self.rule):
            self.point(("verify", 0))
            return self.verify_window()
        count = self.window() if self.lazy else len(self.drafts)
        for j in range(len(self.tokens) - self.start, count):  # from the next undecided one
            if len(self.drafts) == j:  # a lazy run: draft j is not drawn yet
                self.point(("draw", j))
                self.draw()
            self.point(("verify", j))
            decision = self.commit(self.target_rows[j], j)
            if not decision.accepted or self.done:
                return False
        if self.lazy:  # p after the drafts, for the bonus token
            self.target_rows = (*self.target_rows, self.model_rows("target", self.context, 1)[0])
        return True

    def draw(self) -> None:
        """A ``lazy`` run's next draft, drawn when it is decided: ``q`` and ``p`` at its position
        (the rows `draft` and `score` read: after the committed tokens and the drafts before
        it), and the draft from ``q`` (`add_draft`).

        Why it is sound: a token rule decides position ``j`` from ``p``, ``q`` and ``x_j``
        alone, and without EOS no draft cuts the window short, so what `draft` and `score` put
        on the clock and the trace does not depend on the drafts' values, and a draft after a
        rejection changes nothing of the run. Drawing it or not gives the same law of the whole
        run (tokens, clock, trace, counters), and the exact checker explores ``k`` draws fewer
        at each rejection. A run is lazy only under a checker that resumes, for `SIRun`'s own
        code (`SIRun.run` sets `SIState.lazy`): under a sampler the draws keep their order."""
        context = self.context
        row = self.model_rows("drafter", context, 1)[0]
        self.target_rows = (*self.target_rows, self.model_rows("target", context, 1)[0])
        self.add_draft(row)

    def verify_window(self) -> bool:
        """Decide all drafts at once with `decide_window` and commit its decisions in order.
        True when every draft was accepted (and none is EOS)."""
        decisions = decide_window(self.rule, self.target_rows, self.draft_rows, self.drafts,
                                  self.rng, tuple(self.tokens))
        for decision in decisions:
            self.record_decision(decision)
            if self.done:
                return False
        return len(decisions) == len(self.drafts) and all(d.accepted for d in decisions)

    def bonus(self) -> None:
        """Every draft was accepted: the bonus token, from ``p`` after the last draft."""
        self.commit(self.target_rows[len(self.drafts)])

    def commit(self, target_row: Sequence[Number], draft: int | None = None) -> Decision:
        """Decide the next position from ``p = target_row`` and the draft of index ``draft``
        (``None``: no draft, a bonus token), and commit it (the trace, the counters, EOS)."""
        context = tuple(self.tokens)  # the committed tokens before the position
        if draft is None:
            decision = self.rule.decide(target_row, None, None, self.rng, context)
        else:
            decision = self.rule.decide(target_row, self.draft_rows[draft], self.drafts[draft],
                                        self.rng, context)
        self.record_decision(decision)
        return decision

    def record_decision(self, decision: Decision) -> None:
        """Commit a decided position: the trace, the counters, EOS."""
        self.record_commit((len(self.tokens),), decision.kind)
        self.tokens.append(decision.token)
        self.stats[decision.kind] += 1
        self.done = decision.token == self.eos

    def begin(self) -> None:
        """The per-iteration fields as a new iteration starts: ``start`` and ``context`` at the
        committed tokens, no drafts, no rows (nothing of an earlier iteration survives)."""
        self.start = len(self.tokens)
        self.context = tuple(self.tokens)
        self.drafts, self.draft_rows = [], []
        self.target_rows = ()

    def iterate(self) -> None:
        """One iteration: `draft` (``window()`` tokens), `score`, `verify`, and `bonus` when
        every draft was accepted, with a resume point before the bonus. A run restored inside an
        iteration (``step``) goes on from the step it was in."""
        phase = None if self.step is None else self.step[0]
        if phase is None:
            self.stats["iterations"] += 1
            self.begin()
        if phase is None or phase == "draft":
            self.draft()
            self.score()
        if phase == "bonus" or self.verify():
            self.point(_BONUS)
            self.bonus()
        self.step = None

    def run(self) -> Run:
        """Iterate until ``N`` tokens are committed or EOS is.

        Under the exact checker the run enters first (the checker may restore a later snapshot
        of the same path, and the loop goes on from there), then offers a merge point at the top
        of each iteration (the per-iteration fields reset first when `iterate` is `SIRun`'s:
        they are dead there)."""
        hooks = self._hooks
        if hooks is not None:
            checkpointing = self.checkpointing()
            self.resuming = hooks.resumes and checkpointing.resumable
            self.lazy = self.resuming and self.eos is None and not is_window_rule(self.rule)
            hooks.enter(self, checkpointing)  # may put the run where a snapshot of this path was
        while True:
            if self.step is None or self.step is _TOP:
                if len(self.tokens) >= self.n or self.done:
                    break
                self.merge_point()
            self.iterate()
        self.step = None
        return self.result()

    # -- what the exact checker reads (`dsi_ref.base.exact_hooks`) -----------------------------
    def point(self, where: tuple[object, ...]) -> None:
        """A resume point before a step of an iteration (``where``): the run is there (a
        snapshot keeps it), and a resuming run offers the checker a snapshot."""
        self.step = where
        if self.resuming and self._hooks is not None:
            self._hooks.pause(self)

    def merge_point(self) -> None:
        """The merge point at the top of the loop, unless the run was just restored there (the
        point is behind it)."""
        if self.step is _TOP:
            self.step = None
            return
        hooks = self._hooks
        if hooks is not None:
            if type(self).own_iterate:
                self.begin()
            self.step = _TOP
            hooks.merge(self)
            self.step = None

    def built_on(self) -> Mapping[str, object]:
        """The parts the run is built on: what its ``__init__`` set before its fields (models,
        readers, ``rng``, configuration, rule, the cost laws...)."""
        return with_built(self._built)

    def invocation(self) -> tuple[object, ...]:
        """What identifies the invocation: models, prompt, budget, configuration, rule."""
        return (self.target, self.drafter, self.prompt, self.n, self.cfg, self.rule)

    def checkpointing(self) -> Checkpointing:
        """How the exact checker may treat the run (`dsi_ref.base.exact_hooks.Checkpointing`):
        `SIRun`'s own code keeps in its merge states neither the history unless it returns it
        (``record``) nor the clock unless it returns the time (``keep_time``: its future
        depends on the clock through nothing else, and its draws' keys do not hold it), nor
        the rows it derives from the tokens; a subclass that overrides a method keeps them all.
        A built-in rule keeps nothing; another rule's attributes are read as data."""
        own = type(self).own_code
        if not stateless_rule(self.rule):
            return Checkpointing(own=own, resumable=False, history=self.cfg.record or not own,
                                 absolute_time=not (own and not self.cfg.keep_time),
                                 derived=not own, data_parts=(self.rule,))
        return _CHECKPOINTING[own, self.cfg.record, self.cfg.keep_time]

    # -- the seams: models, clock and trace ----------------------------------------------------
    def model_rows(self, model: ModelName, context: tuple[int, ...], count: int) -> Rows:
        """The one place where a model is called: ``model``'s next-token rows after the last
        ``count`` prefixes of prompt + ``context`` (row ``i`` after
        ``context[:len(context) − count + 1 + i]``)."""
        read = self.readers[model]
        full = self.prompt + context
        end = len(full) - count + 1
        return [read(full[:end + i]) for i in range(count)]

    def forward(self, model: ModelName, kind: str, positions: tuple[int, ...],
                context: tuple[int, ...], count: int) -> Rows:
        """One forward of ``model`` (`model_rows`), put on the clock and the trace."""
        rows = self.model_rows(model, context, count)
        self.advance(model, kind, positions)
        return rows

    def advance(self, model: ModelName, kind: str, positions: tuple[int, ...]) -> None:
        """Advance the clock by one forward of ``model`` (TTFT for its first, TPOT after) and
        record it on the trace."""
        latency = self.cfg.latency
        if self._laws[0] is not latency:
            self._laws = (latency, cost_laws(latency))
        first = self.first[model]
        cost = forward_cost(self._laws[1], model, first, self.rng)
        if first:
            self.first[model] = False
        end = self.time + cost
        if self.cfg.record:
            self.trace.append(Event(model, kind, self.time, end, positions, ""))
        self.time = end

    def record_commit(self, positions: tuple[int, ...], note: str) -> None:
        """Mark a commit on the trace (``note``: the decision's kind)."""
        if self.cfg.record:
            self.trace.append(Event("committer", "commit", self.time, self.time, positions, note))

    def counters(self) -> dict[str, int]:
        """The run's counters (`STATS`, or `NON_SI_STATS` without a drafter)."""
        return {name: self.stats[name] for name in self.stat_names}

    def result(self) -> Run:
        """The finished `Run`: tokens, the time of the last event, the trace, the counters
        (a lean run: no trace, no counters, and NaN for the time unless ``keep_time``)."""
        if not self.cfg.record:
            return Run(tuple(self.tokens), self.time if self.cfg.keep_time else math.nan)
        return Run(tuple(self.tokens), self.time, tuple(self.trace), self.counters())


#: `SIRun.checkpointing` with a built-in rule, by ``(own code, record, keep_time)``.
_CHECKPOINTING = {(own, record, keep): Checkpointing(
    own=own, resumable=own, history=record or not own, absolute_time=not (own and not keep),
    derived=not own) for own in (True, False) for record in (True, False)
    for keep in (True, False)}


def speculative(target: LanguageModel, drafter: LanguageModel, prompt: Sequence[int],
                max_new_tokens: int, rng: Randomness, lookahead: int = 3,
                verify: VerifyRule | Rule = "rejection", *, latency: Latency | None = None,
                record: bool = True, keep_time: bool = True) -> Run:
    """Speculative inference: draft ``lookahead`` tokens, verify them with one target forward.

    Returns a `Run` whose ``tokens`` follow the target's law exactly (for ``"rejection"`` and
    ``"exact_match"``; the greedy target sequence for ``"greedy"``), whatever the drafter.
    ``record=False`` returns no trace and no counters, ``keep_time=False`` no time either
    (`SpeculativeConfig`): the same law of tokens, and far more merging in the exact engine.
    """
    config = reuse_config(SpeculativeConfig, lookahead, verify,
                          DEFAULT_LATENCY if latency is None else latency, record, keep_time)
    prompt = check_inputs(target, prompt, max_new_tokens, drafter, rng=rng)
    return SIRun(target, drafter, prompt, max_new_tokens, rng, config).run()
