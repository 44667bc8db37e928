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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, cast

from ..base.errors import InvalidParameterError
from ..base.latency import Latency, Time
from ..base.models import LanguageModel, Number, Prefix
from ..base.randomness import Randomness
from ..base.result import Event, Run
from ..base.validate import check_int
from .common import (
    DEFAULT_LATENCY,
    FixedParts,
    NoMerge,
    PrefixKey,
    Recorder,
    check_inputs,
    check_record,
    merge_hint,
    model_reader,
    overridden,
    own_parts,
    resumes,
    reuse_config,
    same_parts,
    stateless_rule,
)
from .verification import Decision, Rule, VerifyRule, as_rule, decide_window, is_window_rule

__all__ = ["NON_SI_STATS", "STATS", "ModelName", "Rows", "SIRun", "SpeculativeConfig",
           "speculative"]

#: The counters of an SI run (`Run.stats`).
STATS = ("iterations", "drafts", "accepted", "rejected", "bonus", "target_forwards",
         "drafter_forwards")
#: The counters of a run without a drafter (non-SI).
NON_SI_STATS = ("target_forwards", "bonus")

ModelName = Literal["drafter", "target"]
#: Next-token rows of one forward: ``rows[i]`` is a distribution over the vocabulary.
Rows = Sequence[Sequence[Number]]
#: What `SIRun._snapshot` keeps: the fixed parts, tokens, done, the recorder's clock, trace,
#: counters and first flags, and where the run is in an iteration with its scratch.
_Snapshot: TypeAlias = tuple[tuple[object, ...], tuple[int, ...], bool, Time, tuple[Event, ...],
                             tuple[tuple[str, int], ...], tuple[tuple[str, bool], ...],
                             tuple[str, int], int, tuple[int, ...], tuple[int, ...],
                             tuple[Sequence[Number], ...], tuple[Sequence[Number], ...],
                             tuple[int, int]]


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


class SIRun:
    """One run of SI: its state, and the steps of the algorithm as methods.

    Public so that variants override one step (the zoo's mutants) or the seams (the torch
    engine: `model_rows`, `forward`, `record_commit`, `result`); use `speculative` to run it.

    Args:
        target: the target model (``p``).
        drafter: the drafter (``q``); ``None`` runs non-SI (an empty window every iteration,
            ``config.lookahead`` unused, and only the counters of `NON_SI_STATS`).
        prompt: the validated prompt (`dsi_ref.decoders.common.check_inputs`).
        max_new_tokens: ``N``, the budget of generated tokens.
        rng: every random draw (keyed; see `dsi_ref.decoders.verification`).
        config: ``k``, the rule and the latencies.

    State: ``tokens`` (committed), ``done`` (EOS committed) and ``rec`` (the virtual clock, the
    trace and the counters ``stats``); per iteration ``start`` (the first position decided),
    ``drafts`` and ``draft_rows`` (``x_j`` and ``q`` at each), ``context`` (committed + drafts)
    and ``target_rows`` (``p`` at the ``len(drafts) + 1`` positions).
    """

    def __init__(self, target: LanguageModel, drafter: LanguageModel | None, prompt: Prefix,
                 max_new_tokens: int, rng: Randomness, config: SpeculativeConfig) -> None:
        self.target, self.drafter, self.prompt = target, drafter, prompt
        self.n, self.rng, self.cfg = max_new_tokens, rng, config
        self.eos = target.eos
        self.rule: Rule = as_rule(config.verify)
        self.lookahead = config.lookahead if drafter is not None else 0
        self.stat_names = STATS if drafter is not None else NON_SI_STATS
        self.readers: dict[str, Callable[[Prefix], tuple[Number, ...]]] = {
            "target": model_reader(target)}
        if drafter is not None:
            self.readers["drafter"] = model_reader(drafter)
        self.rec = Recorder(config.latency, STATS, record=config.record)
        self.stats = self.rec.stats
        self.tokens: list[int] = []
        self.done = False
        self.start = 0
        self.context: tuple[int, ...] = ()
        self.drafts: list[int] = []
        self.draft_rows: list[Sequence[Number]] = []
        self.target_rows: Rows = ()
        self._fixed = FixedParts(self, _FIXED)

    # -- the steps of one iteration ------------------------------------------------------------
    def window(self) -> int:
        """How many tokens to draft this iteration: ``min(k, remaining − 1)``, which leaves room
        for the bonus token (0 without a drafter); ``remaining`` counts from ``start``, the
        iteration's first position, so it stays the same while the iteration commits."""
        return min(self.lookahead, self.n - self.start - 1)

    def draft(self) -> None:
        """The drafter's forwards: ``x_j ~ q(· | prefix, x_<j)`` for ``j < window()``; nothing is
        drafted past a drafted EOS."""
        for j in range(self.window()):
            context = self.context  # generated tokens before the next draft: committed + drafts
            row = self.forward("drafter", "draft", (self.start + j,), context, 1)[0]
            x = self.rule.draft(row, self.rng, context)
            self.drafts.append(x)
            self.draft_rows.append(row)
            self.context = context + (x,)
            if x == self.eos:
                break
        self.stats["drafts"] += len(self.drafts)
        self.stats["drafter_forwards"] += len(self.drafts)

    def score(self) -> None:
        """One target forward over prefix + drafts: ``p`` at each of the ``len(drafts) + 1``
        positions ``start .. start + len(drafts)``."""
        count = len(self.drafts) + 1
        self.target_rows = self.forward("target", "verify" if self.drafts else "forward",
                                        tuple(range(self.start, self.start + count)),
                                        self.context, count)
        self.stats["target_forwards"] += 1

    def verify(self) -> bool:
        """Decide the drafts left to right against ``p``; stop at the first rejection (its
        position gets the residual token) or at EOS. True when every draft was accepted, so
        that the position after them gets a bonus token. A `WindowRule` (block verification)
        decides the window as a whole instead (`verify_window`)."""
        if is_window_rule(self.rule):
            return self.verify_window()
        for j in range(len(self.drafts)):
            decision = self.commit(self.target_rows[j], j)
            if not decision.accepted or self.done:
                return False
        return True

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

    def iterate(self) -> None:
        """One iteration: `draft` (``window()`` tokens), `score`, `verify`, and `bonus` when
        every draft was accepted."""
        self.stats["iterations"] += 1
        self.start = len(self.tokens)
        self.context = tuple(self.tokens)
        self.drafts, self.draft_rows = [], []
        self.target_rows = ()  # set by score(): nothing of an earlier iteration survives
        self.draft()
        self.score()
        if self.verify():
            self.bonus()

    def state(self) -> Hashable:
        """Everything the rest of the run depends on (the exact engine's merge points, taken at
        the start of each iteration): the clock, trace, counters and tokens of `Recorder.state`,
        and `own_state`, which reads what a subclass keeps on ``self``. A subclass need not
        extend it (it may, to add state kept elsewhere)."""
        return (self.rec.state(self.tokens), self.own_state())

    def own_state(self) -> Hashable:
        """The part of `state` that is not the recorder's: ``done`` and a `fingerprint` of every
        instance attribute `SIRun` does not account for (whatever a subclass added), or a
        `NoMerge` (no merging at this point) when one of them is not plain data.

        Accounted for: the recorder and the tokens (`Recorder.state`; ``stats`` while it is the
        recorder's dict); the parts the run is built on (models, ``rng``, readers, config, rule,
        prompt, ``n``...) while they are the very objects they were when `run` started (a
        rebound one is read as data; the rule's own attributes, if any, always are); and the
        per-iteration scratch (``start``, ``context``, ``drafts``, ``draft_rows``,
        ``target_rows``), dead at the start of an iteration because `iterate` resets it before
        any step runs, which holds only while ``iterate`` and ``run`` are `SIRun`'s: a subclass
        that overrides either has its scratch read too.
        """
        cls = type(self)
        skip = _SKIP.get(cls)
        if skip is None:
            skip = _SKIP[cls] = _ACCOUNTED | (_SCRATCH if not overridden(cls, SIRun, ("iterate",
                                                                                   "run"))
                                              else frozenset())
        if type(self.rec) is not Recorder or self.rec.latency is not self.cfg.latency:
            return NoMerge()  # a recorder of its own: its state is not Recorder.state's
        changed = self._fixed.changed(self)
        if changed:
            skip = skip - changed  # rebound: read as data (a model is not: no merging)
        if self.stats is not self.rec.stats:
            skip = skip - {"stats"}
        rule_state, extra = own_parts(self, skip, lambda: self._known(changed))
        return (self.done, rule_state, extra)

    def _known(self, changed: frozenset[str]) -> dict[int, str]:
        """The objects outside ``self``'s own data that a subclass attribute may refer to
        (the parts of the run that are still what they were, its own containers)."""
        known = self._fixed.known(changed)
        known.update({id(self): "self", id(self.tokens): "tokens", id(self.rec): "rec",
                      id(self.rec.stats): "stats", id(self.rec.trace): "trace",
                      id(self.rec.first): "first"})
        return known

    def run(self) -> Run:
        """Iterate until ``N`` tokens are committed or EOS is."""
        hint = merge_hint(self.rng)
        if hint is not None and resumes(self.rng) and self._resumable():
            return self._run_resuming(hint)
        # what the run is built on, before it starts (a resuming run checks its parts when it
        # restores a snapshot, `same_parts`)
        if self._fixed.changed(self):
            self._fixed = FixedParts(self, _FIXED)
        while len(self.tokens) < self.n and not self.done:
            if hint:
                hint(self.state(), entry=self.stats["iterations"] == 0,
                     committed=tuple(self.tokens))
            self.iterate()
        return self.result()

    # -- resuming (the exact engine's snapshots; see `dsi_ref.base.randomness.merge_point`) ---
    def _run_resuming(self, hint: Callable[..., None]) -> Run:
        """`run` for an interpreter that resumes (`SIRun`'s own code only, `_resumable`): the
        same merge points, with snapshots, and resume points inside each iteration
        (`_iterate_resuming`), so that a run restored by the engine goes on from the last point
        before the choice it branches at instead of replaying the iteration's earlier choices.
        """
        self._phase: tuple[str, int] = ("entry", 0)
        self._trace_key = PrefixKey()
        # the entry: nothing has happened yet, so the invocation (which the engine's key holds)
        # is the whole state; the engine may restore a later snapshot of the same path here
        hint(("start",), entry=True, committed=tuple(self.tokens), snapshot=self._snapshot,
             restore=self._restore)
        at_top = self._phase[0] == "start"  # restored at a merge point: it is behind
        if self._phase[0] == "entry":
            self._phase = ("start", 0)
        while self._phase[0] != "start" or (len(self.tokens) < self.n and not self.done):
            if self._phase[0] == "start" and not at_top:
                hint(self._state_resuming(), committed=tuple(self.tokens),
                     snapshot=self._snapshot, restore=self._restore)
            at_top = False
            self._iterate_resuming()
        return self.result()

    def _iterate_resuming(self) -> None:
        """`iterate` (the same steps as `iterate`, `draft`, `score`, `verify` and `bonus`), from
        ``self._phase``: the start, before draft ``j`` (``("draft", j)``, ``j >= 1``), before
        the decision of draft ``j`` (``("verify", j)``; block verification: ``j = 0``, the
        window at once) or before the bonus token (``("bonus", 0)``); without EOS, for a token
        rule, the drafts are drawn as they are decided instead (``("lazy", j)``, ``("decide",
        j)``: `_verify_lazily`). A resume point before each of them offers the engine a snapshot
        (`_snapshot` reads the phase)."""
        phase, j = self._phase
        if phase == "start":
            self.stats["iterations"] += 1
            self.start = len(self.tokens)
            self.context = tuple(self.tokens)
            self.drafts, self.draft_rows = [], []
            self.target_rows = ()
            if self.eos is None and not is_window_rule(self.rule):
                self._forwards_ahead()
                phase, j = "lazy", 0
            else:
                phase, j = "draft", 0
        accepted = True
        if phase in ("lazy", "decide"):
            accepted = self._verify_lazily(phase, j)
        if phase == "draft":
            window = self.window()
            while j < window:
                if j:
                    self._resume_point("draft", j)
                context = self.context
                row = self.forward("drafter", "draft", (self.start + j,), context, 1)[0]
                x = self.rule.draft(row, self.rng, context)
                self.drafts.append(x)
                self.draft_rows.append(row)
                self.context = context + (x,)
                j += 1
                if x == self.eos:
                    break
            self.stats["drafts"] += len(self.drafts)
            self.stats["drafter_forwards"] += len(self.drafts)
            self.score()
            phase, j = "verify", 0
        if phase == "verify":
            if is_window_rule(self.rule):
                self._resume_point("verify", 0)
                accepted = self.verify_window()
            else:
                while j < len(self.drafts):
                    self._resume_point("verify", j)
                    decision = self.commit(self.target_rows[j], j)
                    j += 1
                    if not decision.accepted or self.done:
                        accepted = False
                        break
        if not accepted:
            self._phase = ("start", 0)
            return
        self._resume_point("bonus", 0)
        self.bonus()
        self._phase = ("start", 0)

    def _forwards_ahead(self) -> None:
        """The forwards of an iteration (`draft` and `score`), on the clock and the trace, before
        any draft is drawn: without EOS a window always holds ``window()`` drafts, so that what
        `draft` and `score` record does not depend on the drafts' values."""
        window = self.window()
        for j in range(window):
            self.rec.forward("drafter", "draft", (self.start + j,), self.rng)
        self.stats["drafts"] += window
        self.stats["drafter_forwards"] += window
        self.rec.forward("target", "verify" if window else "forward",
                         tuple(range(self.start, self.start + window + 1)), self.rng)
        self.stats["target_forwards"] += 1

    def _verify_lazily(self, phase: str, j: int) -> bool:
        """The rest of an iteration whose forwards are on the clock (`_forwards_ahead`), from
        draft ``j`` on: each draft is drawn only when the decision of the one before it accepted
        it (phase ``"lazy"``: before draft ``j``; ``"decide"``: before its decision). A token
        rule decides position ``j`` from ``p``, ``q`` and ``x_j`` alone, and no EOS can cut the
        window short, so a draft after a rejection changes nothing of the run: drawing it or
        not gives the same law of the whole run (tokens, clock, trace, counters), and the
        engine explores ``k`` draws fewer at each rejection. The rows are those `draft` and
        `score` read (``q`` and ``p`` after the committed tokens and ``x_<j``). True when every
        draft was accepted (``p`` after them is then in ``target_rows``, for the bonus)."""
        window = self.window()
        while j < window:
            if phase == "lazy":
                self._resume_point("lazy", j)
                context = self.context
                row = self.model_rows("drafter", context, 1)[0]
                self.drafts.append(self.rule.draft(row, self.rng, context))
                self.draft_rows.append(row)
                self.target_rows = (*self.target_rows, self.model_rows("target", context, 1)[0])
                self.context = context + (self.drafts[j],)
            self._resume_point("decide", j)
            phase = "lazy"
            decision = self.commit(self.target_rows[j], j)
            j += 1
            if not decision.accepted:
                return False
        self.target_rows = (*self.target_rows, self.model_rows("target", self.context, 1)[0])
        return True

    def _state_resuming(self) -> Hashable:
        """`state`, as it is for `SIRun`'s own code on a built-in rule (`_resumable`: the parts
        are never rebound, the rule has no attributes): ``own_state`` is ``(done, (), ())``
        unless the run was given attributes of its own."""
        if self.__dict__.keys() <= _SKIP_OWN and not vars(self.rule):
            rec = self.rec
            if not self.cfg.record:  # a lean run: no trace, no counters (and maybe no time)
                return ((tuple(self.tokens), rec.time if self.cfg.keep_time else None,
                         tuple(rec.first.items())), (self.done, (), ()))
            # `Recorder.state`, the trace as the id of its contents (`PrefixKey`)
            return ((tuple(self.tokens), rec.time, ("trace", self._trace_key.of(rec.trace)),
                     tuple(rec.stats.items()), tuple(rec.first.items())), (self.done, (), ()))
        return self.state()

    def _resume_point(self, phase: str, j: int) -> None:
        self._phase = (phase, j)
        self.rng.resume_point(self._snapshot)  # type: ignore[attr-defined]

    def _resumable(self) -> bool:
        """Whether `_snapshot` copies everything the rest of the run depends on: `SIRun`'s own
        code (not a subclass), its own recorder, a built-in rule. At the start of an iteration
        that is ``tokens``, ``done`` and the recorder's clock, trace, counters and first flags
        (the per-iteration scratch is reset by `iterate`), besides the fixed parts."""
        return (type(self) is SIRun and type(self.rec) is Recorder
                and self.rec.latency is self.cfg.latency and self.stats is self.rec.stats
                and stateless_rule(self.rule))

    def _parts(self) -> tuple[object, ...]:
        return (self.target, self.drafter, self.prompt, self.n, self.cfg, self.rule)

    def _snapshot(self) -> object:
        rec = self.rec
        return (self._parts(), tuple(self.tokens), self.done, rec.time, tuple(rec.trace),
                tuple(rec.stats.items()), tuple(rec.first.items()), self._phase, self.start,
                self.context, tuple(self.drafts), tuple(self.draft_rows),
                tuple(self.target_rows), self._trace_key.state())

    def _restore(self, snapshot: object) -> bool:
        (parts, tokens, done, time, trace, stats, first, phase, start, context, drafts,
         draft_rows, target_rows, trace_key) = cast(_Snapshot, snapshot)
        if not same_parts(parts, self._parts()):
            return False
        rec = self.rec
        self.tokens[:] = tokens
        self.done = done
        rec.time = time
        rec.trace[:] = trace
        rec.stats.update(stats)
        rec.first.update(first)
        self._phase = phase
        self.start, self.context = start, context
        self.drafts, self.draft_rows = list(drafts), list(draft_rows)
        self.target_rows = target_rows
        self._trace_key.set_state(trace_key)
        return True

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
        self.rec.forward(model, kind, positions, self.rng)
        return rows

    def record_commit(self, positions: tuple[int, ...], note: str) -> None:
        """Mark a commit on the trace (``note``: the decision's kind)."""
        self.rec.commit(positions, note)

    def counters(self) -> dict[str, int]:
        """The run's counters (`STATS`, or `NON_SI_STATS` without a drafter)."""
        return {name: self.stats[name] for name in self.stat_names}

    def result(self) -> Run:
        """The finished `Run`: tokens, the time of the last event, the trace, the counters
        (a lean run: no trace, no counters, and NaN for the time unless ``keep_time``)."""
        if not self.cfg.record:
            return Run(tuple(self.tokens), self.rec.time if self.cfg.keep_time else math.nan)
        return Run(tuple(self.tokens), self.rec.time, tuple(self.rec.trace), self.counters())


#: The parts an `SIRun` is built on (`SIRun.own_state`).
_FIXED = ("target", "drafter", "prompt", "n", "rng", "cfg", "eos", "rule", "lookahead",
          "stat_names", "readers")
#: What `SIRun.state` accounts for besides the fixed parts (``_phase``: where a resuming run is
#: inside an iteration, always the start at a merge point).
_ACCOUNTED = frozenset(_FIXED) | {"rec", "tokens", "stats", "done", "_fixed", "_phase",
                                     "_trace_key"}
#: The per-iteration scratch that `SIRun.iterate` resets before any step.
_SCRATCH = frozenset({"start", "context", "drafts", "draft_rows", "target_rows"})
#: Per class, the attribute names `SIRun.own_state` need not read.
_SKIP: dict[type, frozenset[str]] = {}
#: Those of `SIRun` itself.
_SKIP_OWN = _ACCOUNTED | _SCRATCH


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
