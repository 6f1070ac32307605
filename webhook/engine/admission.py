"""One admission request in, one outcome out: guard clauses -> match -> mutate -> patch.

The server, the dry-run CLI and the policy test suites all call ``admit``, so they can
never disagree. ``admit`` never raises for a bad object: a failing policy is reported as
a warning and left out (``context.PlacementError``), anything unexpected fails open with
``result="error"`` and no patch.
"""
from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from webhook import ANNOTATION_SKIP
from webhook.engine import matching, patching, placement, revisions, shapes
from webhook.engine.context import PlacementError
from webhook.engine.review import Request
from webhook.engine.working import record_applied, working_copy
from webhook.kube.kinds import Target, Targets, split_api_version
from webhook.kube.objects import controller_of
from webhook.kube.pointers import get_path
from webhook.kube.warnings import clip, clip_all
from webhook.policy.policyset import Policy, PolicySet

if TYPE_CHECKING:
    from webhook.cluster.view import ClusterView

log = logging.getLogger(__name__)

RESULTS = ("patched", "unchanged", "skipped", "ignored", "error")

NO_POLICY_SET = "placement-webhook: no valid policy set is loaded; nothing was applied"
# An UPDATE that leaves the pod template as it was but for the engine's fields (revisions.py).
KEPT = "pod template kept as before this update (no rollout): today's policies apply at the next rollout"
WRITTEN_BACK = "placement this update dropped from the pod template written back (no rollout)"


@dataclass(frozen=True, slots=True)
class Steps:
    """The two calls through which admission reaches matching and the engine for each
    policy. Tests pass their own to check orchestration (order, audit mode, failures,
    settling) apart from engine semantics, and turn off ``settle_early`` to compare with
    the admission that always runs the settling pass (``_Run.settled_early``)."""

    selects: Callable[[Policy, matching.Subject], matching.Verdict] = matching.selects
    apply: Callable[..., placement.Applied] = placement.apply_policy
    settle_early: bool = True


ENGINE = Steps()


@dataclass(slots=True)
class Outcome:
    """What admission did to one object. ``object`` and the patch's values share structure with
    the request's object and with the policy set (``engine.working``): read them, or copy first."""

    object: dict[str, Any] | None  # the object after mutation (the original when nothing changed)
    patch: list[dict[str, Any]]  # RFC 6902; applying it to the request's object gives `object`
    warnings: list[str]  # clipped and without repeats (``clip_all``): the server sends them as they are
    applied: list[str] = field(default_factory=list)  # policies that changed the object, sorted
    audited: list[str] = field(default_factory=list)  # audit-mode policies that would have
    result: str = "unchanged"  # one of RESULTS
    error: str | None = None  # engine error (fail open for this object)
    failed: list[str] = field(default_factory=list)  # policies that raised PlacementError
    reason: str = ""  # why the object was ignored or skipped, for logs and the CLI
    target: Target | None = None  # the kind as the policy set knows it; None: not a workload kind


def admit(
    request: Request, *, policies: PolicySet, cluster: ClusterView | None = None, steps: Steps = ENGINE
) -> Outcome:
    """Run the policy set over the request's object and return the patch and warnings.

    The one place admission fails open: whatever goes wrong, the object is admitted
    unchanged with a warning, and ``result`` says ``error``.
    """
    target = policies.targets.lookup(request.group, request.kind)
    try:
        outcome = _admit(request, policies, cluster, target, steps)
    except Exception as exc:  # fail open per object: never block a workload on our bug
        log.exception("admission failed for %s %s/%s", request.kind, request.namespace, request.name)
        outcome = Outcome(
            object=request.object,
            patch=[],
            warnings=[clip(f"placement-webhook: internal error, object admitted unchanged: {exc}")],
            result="error",
            error=f"{type(exc).__name__}: {exc}",
        )
    outcome.target = target
    if not policies.loaded:
        outcome.warnings.append(NO_POLICY_SET)
    return outcome


def _admit(
    request: Request, policies: PolicySet, cluster: ClusterView | None, target: Target | None, steps: Steps
) -> Outcome:
    ignored = _ignore_reason(request, target) or _owned_reason(request.object, policies.targets)
    if ignored or target is None or request.object is None:
        return Outcome(object=request.object, patch=[], warnings=[], result="ignored", reason=ignored)
    namespace = matching.subject_namespace(request.object, request.namespace)
    candidates = matching.index_for(policies).candidates(target, namespace)
    skip = _skip_requested(request.object)
    if skip:  # the object opts out of every policy that allows it
        candidates = tuple(p for p in candidates if not p.allow_skip)
        if not candidates:
            return _skipped(request.object)
    kept = revisions.kept_template(request, target)
    base = revisions.with_template(request, target, kept) if kept is not None else request.object
    if not candidates:  # what a run over no policy would answer, without setting one up
        return _noted(_as_based(request, base), request, target, kept)
    # Gatekeeper's rule: re-apply until the object stops changing, at most one pass more
    # than there are policies. A policy's decision can depend on what a later one wrote
    # (safe rollouts count the nodes a later nodeSelector leaves eligible), and only a
    # converged object makes the second admission of the output an empty patch. A set with
    # no such policy is settled after one pass (``_Run.settling``), and most sets are like that.
    run = _Run(request=request, candidates=candidates, base=base, target=target, cluster=cluster, steps=steps,
               skip=skip)
    outcome = _settled(run)
    if skip and not run.refused:  # no policy that refuses the skip selects the object
        return _skipped(request.object, notes=outcome.warnings)
    if kept is not None and (outcome.result == "error" or _template(outcome.object, target) != kept):
        outcome = _held(run, outcome)
    return _checked(_noted(outcome, request, target, kept), request, target)


def _held(run: _Run, outcome: Outcome) -> Outcome:
    """Today's policies would change a kept template (or never settle on it): the update
    leaves everything the engine owns as the request and the old object had it, the strategy
    included (it is decided with the template, again at the next rollout), and says what
    each policy would do, as in audit mode."""
    held = _settled(run.holding())
    diverged = [outcome.error] if outcome.error else []
    held.warnings = clip_all([KEPT, *diverged, *held.warnings])
    return held


def _as_based(request: Request, base: dict[str, Any]) -> Outcome:
    """What admission answers with no policy to run: ``base`` (the request's object, or it
    with the old template written back)."""
    patch = [] if base is request.object else patching.diff(request.object, base)
    return Outcome(object=base if patch else request.object, patch=patch, warnings=[],
                   result="patched" if patch else "unchanged")


def _noted(outcome: Outcome, request: Request, target: Target, kept: dict[str, Any] | None) -> Outcome:
    """Say so when the kept template writes back what the request dropped."""
    if kept is not None and outcome.result != "error" and _template(request.object, target) != kept:
        outcome.warnings = clip_all([*outcome.warnings, WRITTEN_BACK])
    return outcome


def _template(obj: dict[str, Any] | None, target: Target) -> Any:
    return get_path(obj, revisions.template_path(target) or ())


def _settled(run: _Run) -> Outcome:
    if not run.settling:
        run.run_pass()
        return run.finish()
    for _ in range(len(run.candidates) + 1):
        if not run.run_pass():
            return run.finish()
    return run.diverged()


def _skipped(obj: dict[str, Any], *, notes: list[str] | None = None) -> Outcome:
    text = f"{ANNOTATION_SKIP}=true: placement policies skipped"
    return Outcome(object=obj, patch=[], warnings=clip_all([text, *(notes or ())]), result="skipped", reason=text)


def _checked(outcome: Outcome, request: Request, target: Target) -> Outcome:
    """An UPDATE of a frozen template may carry only the changes the API server allows;
    a patch with any other would make the user's own update fail validation."""
    if not (target.frozen_template and request.operation == "UPDATE" and outcome.patch and request.object):
        return outcome
    if _template_change_allowed(request.object, outcome.object or {}, target):
        return outcome
    text = (f"the pod template of a suspended {target.kind} may change only in node affinity, nodeSelector "
            "and tolerations: not mutated")
    return Outcome(object=request.object, patch=[], warnings=clip_all([*outcome.warnings, text]), result="unchanged",
                   reason=text, failed=outcome.failed)


def _reads_others_output(policy: Policy) -> bool:
    """Whether what ``policy`` does can depend on what another policy writes.

    ``merge`` and ``keep`` edits of a field group are idempotent whatever else is in the
    object. What reads other policies' output: ``replace`` (it rewrites a group that a later
    ``merge`` policy adds to, so the next admission would see it act again), safe rollouts (the pod's affinity, nodeSelector and
    tolerations decide whether a surge can schedule), ``preemptionPolicy`` (written only
    when the class, perhaps set by another policy, carries the same value), and matching
    on pod labels or annotations (the engine writes a group label and the applied annotation).
    """
    cached = policy.cache.get("admission.reads_others_output")
    if cached is None:
        spec = policy.spec
        cached = bool(
            policy.on_conflict == "replace"
            or spec.get("rollout")
            or (spec.get("scheduling") or {}).get("preemptionPolicy")
            or _matches_on_written(policy)
        )
        policy.cache["admission.reads_others_output"] = cached
    return bool(cached)


def _matches_on_written(policy: Policy) -> bool:
    """Whether ``policy``'s match or exclude reads what the engine writes: pod labels (the
    group label) and annotations (the applied annotation). Everything else matching reads (kind,
    operation, namespace, name, object labels, the cluster's namespace labels) is the same in
    every pass of an admission, and so is the verdict of a policy that reads only that."""
    cached = policy.cache.get("admission.matches_on_written")
    if cached is None:
        spec = policy.spec
        criteria = [spec.get("match") or {}, spec.get("exclude") or {}]
        cached = any(c.get("podSelector") or c.get("annotations") for c in criteria)
        policy.cache["admission.matches_on_written"] = cached
    return bool(cached)


def _ignore_reason(request: Request, target: Target | None) -> str:
    if request.sub_resource:  # a Scale or status review carries no workload, whatever its kind
        return f"subresource {request.sub_resource} is not mutated"
    if request.operation not in ("CREATE", "UPDATE"):
        return f"operation {request.operation} is not mutated"
    if target is None:
        return _not_a_workload(request)
    if request.operation == "UPDATE" and not target.mutable_placement:
        return f"{target.kind} placement is immutable after creation: UPDATE is not mutated"
    if request.operation == "UPDATE" and target.frozen_template and not _scheduling_directives_mutable(request):
        return (f"the pod template of a {target.kind} is immutable once it is not suspended or has started: "
                "UPDATE is not mutated")
    if not isinstance(request.object, dict):
        return "the request carries no object"
    return ""


def _owned_reason(obj: dict[str, Any] | None, targets: Targets) -> str:
    """Why an object stamped from its controller's template is not placed again ("" when it is not).

    The owner's admission placed that template. Mutating the copy again can make it differ
    from the template (new policies since, a ``replace`` policy): the Deployment controller
    then sees no ReplicaSet matching its template, creates another, which is mutated again, a
    hot loop. Only owners of kinds the engine handles count, custom kinds declared in the
    kinds configuration included: a third-party operator's objects were never placed.
    """
    ref = controller_of(obj)
    if ref is None:
        return ""
    group, _version = split_api_version(str(ref.get("apiVersion") or ""))
    kind = str(ref.get("kind") or "")
    if targets.lookup(group, kind) is None:
        return ""
    return f"owned by {kind}/{ref.get('name') or ''}: placed through its owner"


def _not_a_workload(request: Request) -> str:
    if not request.kind:
        return "the object has no kind"
    if not request.version:
        return f"the {request.kind} has no apiVersion"
    group = f"{request.group}/" if request.group else ""
    return f"kind {group}{request.kind} is not a workload kind placement-webhook handles"


def _scheduling_directives_mutable(request: Request) -> bool:
    """A Job's node affinity, nodeSelector, tolerations, template labels and annotations may
    change only while the stored Job is suspended and has never started
    (``validationOptionsForJob`` in pkg/registry/batch/job/strategy.go)."""
    old = request.old_object or {}
    spec, status = old.get("spec") or {}, old.get("status") or {}
    return spec.get("suspend") is True and not status.get("startTime")


# What validatePodTemplateUpdate (pkg/apis/batch/validation) lets a suspended, never-started
# Job change in its template; everything else must stay as stored.
_MUTABLE_TEMPLATE_FIELDS = (("metadata", "labels"), ("metadata", "annotations"), ("spec", "nodeSelector"),
                            ("spec", "tolerations"), ("spec", "schedulingGates"), ("spec", "affinity", "nodeAffinity"))


def _template_change_allowed(original: dict[str, Any], mutated: dict[str, Any], target: Target) -> bool:
    """Whether ``mutated`` changes nothing of a frozen pod template but what may change."""
    path = target.pod_metadata[:-1]  # the template: (spec, template)
    before, after = get_path(original, path) or {}, get_path(mutated, path) or {}
    return _masked(before) == _masked(after)


def _masked(template: dict[str, Any]) -> Any:
    masked = copy.deepcopy(template)
    for *parents, leaf in _MUTABLE_TEMPLATE_FIELDS:
        container = get_path(masked, tuple(parents))
        if isinstance(container, dict):
            container.pop(leaf, None)
    spec = masked.get("spec")
    if isinstance(spec, dict) and spec.get("affinity") == {}:
        del spec["affinity"]  # an affinity that held only nodeAffinity may come and go
    return masked


def _skip_requested(obj: dict[str, Any]) -> bool:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    value = annotations.get(ANNOTATION_SKIP) if isinstance(annotations, dict) else None
    return value is not None and str(value).strip().lower() == "true"


class _Run:
    """The state of one admission: the working copy and what each policy did to it."""

    def __init__(
        self, *, request: Request, candidates: tuple[Policy, ...], target: Target, cluster: ClusterView | None,
        steps: Steps, base: dict[str, Any] | None = None, skip: bool = False, hold: bool = False,
    ) -> None:
        assert request.object is not None
        self.request, self.target, self.cluster, self.steps = request, target, cluster, steps
        self.candidates = candidates  # in run order
        # What the candidates read, asked once per admission rather than per policy and pass:
        # the names of those that read others' output (when any does, another pass may
        # follow), and of those whose criteria read what the engine writes.
        self.reading = {p.name for p in candidates if _reads_others_output(p)}
        self.settling = bool(self.reading)
        self.matching_on_written = {p.name for p in candidates if _matches_on_written(p)}
        self.original: dict[str, Any] = request.object  # what the patch applies to
        # What the policies start from: the request's object, or it with the engine's fields
        # of a kept pod template written back (revisions.py).
        self.base: dict[str, Any] = request.object if base is None else base
        # Every policy only says what it would do, as in audit mode: an update that keeps the
        # template, which today's policies would change.
        self.hold = hold
        # Built when a policy first runs: most reviews match no policy and need no copy.
        self._working: dict[str, Any] | None = None
        # What this pass had to say; a settling pass repeats what still holds, so only the
        # last pass's warnings are the answer (an earlier pass's decision may be superseded).
        self.warnings: list[str] = []
        self.failures: list[str] = []  # policies left out, in any pass: said once, kept
        self.applied: list[Policy] = []  # every application that changed the object, in order
        self.applied_names: set[str] = set()  # their names
        self.audited: set[str] = set()
        self.failed: set[str] = set()
        self.changed_in_pass: list[str] = []
        # The required spreads this pass holds the object to, (policy, topology key): their
        # domains are counted in the object admission answers with (``finish``).
        self.spreads: list[tuple[str, str]] = []
        # original -> working, as of the last pass that changed it (original -> base before one)
        self.patch: list[dict[str, Any]] = [] if self.base is self.original else patching.diff(self.original, self.base)
        # The object asks to be skipped: only policies with allowSkip false run, and each one
        # that selects it says it refused.
        self.skip = skip
        self.refused: set[str] = set()
        self._subject: matching.Subject | None = None
        self._subject_current = False  # built since the last change (see ``subject``)
        # Verdicts that hold for every pass of this admission (see ``verdict``), by policy name.
        self._verdicts: dict[str, matching.Verdict] = {}
        self._well_shaped: bool | None = None  # see ``well_shaped``

    def run_pass(self) -> bool:
        """Offer the object to every candidate once; True when another pass must follow:
        the pass as a whole changed the object and is not provably settled (``settled_early``).

        A ``replace`` policy and a ``merge`` one may each edit a field group and still leave
        it as the previous pass did: the patch is the same, and that is settled. The patch of
        the last changing pass is the answer, so a settled object is diffed only once.
        """
        self.changed_in_pass = []
        self.warnings = []
        self.spreads = []
        last_change, replaced = self._offer_in_order()
        if not self.changed_in_pass:
            return False
        record_applied(self.working, sorted(self.applied_names))
        previous, self.patch = self.patch, patching.diff(self.original, self.working)
        if not self.settling:
            return True
        if patching.same(self.patch, previous):
            return False
        if self.settled_early(last_change=last_change, replaced=replaced):
            return False
        # The next pass edits a copy of this pass's object, so this pass's patch, whose values
        # are parts of the object, stays as it is to compare with the next one.
        self._working, self._subject_current = working_copy(self.working, self.target), False
        return True

    def _offer_in_order(self) -> tuple[int, bool]:
        """Offer the object to every candidate once, noting for ``settled_early`` the position
        of the last change and whether a ``replace`` policy changed it."""
        last_change, replaced = -1, False
        for at, policy in enumerate(self.candidates):
            if policy.name not in self.failed and self.consider(policy):
                last_change, replaced = at, replaced or policy.on_conflict == "replace"
        return last_change, replaced

    def _reads(self, policy: Policy) -> bool:
        """Whether what ``policy`` did in this pass depends on the object as it found it
        beyond its own field groups: a policy that reads others' output, or one that only
        reports (audit mode, or a held update), whose report is a reading of the object."""
        return policy.name in self.reading or policy.enforcement == "audit" or self.hold

    def settled_early(self, *, last_change: int, replaced: bool) -> bool:
        """Whether the next pass would provably leave the object as this one left it, so
        that it need not run (a quarter of admission on a heavy set).

        Let ``last_change`` be the position of the last policy that changed the object in
        this pass. The next pass starts from this pass's output. When

        - no ``replace`` policy changed the object (``replaced``): every change was a
          ``merge`` or ``keep`` edit, which adds to a field group and never takes away what
          another policy wrote (the group label included: the spread that needs it writes it);
        - no policy that reads the object (``_reads``: one whose decision depends on others'
          output, or one that only reports) was offered it before ``last_change`` (and did
          not fail: ``failed`` grows only by the policy being offered, so it says after the
          pass which were left out when offered): each saw
          it after every change, as the next pass would show it, but for the applied
          annotation written after the pass;
        - no candidate matches on what the engine writes: nothing reads that annotation;

        then in the next pass a policy at or after ``last_change`` finds what it found here
        (the one at ``last_change`` its own output, which it leaves as it is), and one before
        it, which reads nothing of others', finds its own edits still in place, which a
        ``merge`` or ``keep`` edit leaves as they are whatever else is in the object (both
        are the engine's idempotency, which its property tests hold). Nothing changes, so
        nothing fails either (limits are checked on a change); a policy that failed here is
        not offered again; audit reports and refused skips repeat. The object, patch,
        ``applied``, ``audited`` and ``failed`` are what the next pass would leave, and a set
        that never settles never gets here. Only warnings differ: this pass's also say what
        a policy did as it changed the object (a group label added), which the next pass,
        finding nothing to do, would not say; a set that reads nothing says them too.
        """
        return (self.steps.settle_early and not replaced and not self.matching_on_written
                and not any(self._reads(p) for p in self.candidates[:last_change] if p.name not in self.failed))

    def holding(self) -> _Run:
        """A new run over the same object in which every policy only says what it would do."""
        return _Run(request=self.request, candidates=self.candidates, base=self.base, target=self.target,
                    cluster=self.cluster, steps=self.steps, skip=self.skip, hold=True)

    @property
    def working(self) -> dict[str, Any]:
        if self._working is None:
            self._working = working_copy(self.base, self.target)
        return self._working

    def current(self) -> dict[str, Any]:
        """The object as the policies so far left it (read only)."""
        return self._working if self._working is not None else self.base

    def subject(self, *, fresh: bool = True) -> matching.Subject:
        """The matching view of the object. ``fresh``: of the object as the policies so far
        left it, rebuilt after every change; otherwise any view this admission built will do,
        for a policy whose criteria read nothing the engine writes (``_matches_on_written``)."""
        if self._subject is None or (fresh and not self._subject_current):
            self._subject = matching.subject(
                self.current(),
                target=self.target,
                operation=self.request.operation,
                namespace=self.request.namespace,
                cluster=self.cluster,
            )
            self._subject_current = True
        return self._subject

    def verdict(self, policy: Policy) -> matching.Verdict:
        """Whether ``policy`` selects the object as the policies so far left it. Asked once per
        admission for a policy whose criteria read nothing the engine writes, since its
        verdict cannot change between passes (``_matches_on_written``)."""
        verdict = self._verdicts.get(policy.name)
        if verdict is None:
            reads_written = policy.name in self.matching_on_written
            verdict = self.steps.selects(policy, self.subject(fresh=reads_written))
            if not reads_written:
                self._verdicts[policy.name] = verdict
        return verdict

    def consider(self, policy: Policy) -> bool:
        """Offer the object to ``policy``; True when it changed the object."""
        verdict = self.verdict(policy)
        if verdict.undecided:
            self.warnings.append(f"{policy.name}: {verdict.reason}")
        if not verdict.matched:
            return False
        if self.skip:
            self.refused.add(policy.name)
            self.warnings.append(f"{policy.name}: {ANNOTATION_SKIP} refused: the policy has allowSkip: false")
        if policy.enforcement == "audit" or self.hold:
            self._audit(policy)
            return False
        return self._enforce(policy)

    def well_shaped(self) -> bool:
        """Whether the fields the engine reads have their JSON types in the object policies
        start from (``shapes.check``). Asked once: what policies write keeps those types,
        so when it holds no policy application checks again; when it does not, each one
        does, and each is left out with the warning naming the field."""
        if self._well_shaped is None:
            try:
                shapes.check(self.base, self.target)
                self._well_shaped = True
            except PlacementError:
                self._well_shaped = False
        return self._well_shaped

    def _apply(self, obj: dict[str, Any], policy: Policy) -> placement.Applied:
        return self.steps.apply(obj, policy=policy, target=self.target, cluster=self.cluster, original=self.base,
                                well_shaped=self.well_shaped())

    def _enforce(self, policy: Policy) -> bool:
        try:
            result = self._apply(self.working, policy)
        except PlacementError as exc:
            self.failures.append(f"{policy.name}: not applied: {exc}")
            self.failed.add(policy.name)
            self._replay()
            return False
        self.warnings.extend(result.warnings)
        if result.spread_key is not None:
            self.spreads.append((policy.name, result.spread_key))
        if result.changed:
            self.applied.append(policy)
            self.applied_names.add(policy.name)
            self.changed_in_pass.append(policy.name)
            self._subject_current = False
        return result.changed

    def _replay(self) -> None:
        """Undo a policy that failed half-way: rebuild the working copy from the original
        by re-running the policies that succeeded (the engine is deterministic)."""
        self._working = working_copy(self.base, self.target)
        for policy in self.applied:
            self._apply(self.working, policy)
        if self.applied:
            record_applied(self.working, sorted(self.applied_names))
        self._subject_current = False

    def _audit(self, policy: Policy) -> None:
        base = self.current()
        scratch = working_copy(base, self.target)
        try:
            result = self._apply(scratch, policy)
        except PlacementError as exc:
            self.warnings.append(f"{policy.name}: audit: would fail: {exc}")
            return
        self.warnings.extend(f"(audit) {w}" for w in result.warnings)
        if result.spread_key is not None:
            said = self._spread_warnings(scratch, [(policy.name, result.spread_key)])
            self.warnings.extend(f"(audit) {clip(w)}" for w in said)
        if result.changed:
            self.audited.add(policy.name)
            self.warnings.append(f"{policy.name}: audit: would {_summary(patching.diff(base, scratch))}")

    def finish(self) -> Outcome:
        patch = self.patch
        return Outcome(
            object=self.current() if patch else self.original,
            patch=patch,
            warnings=clip_all([*self.failures, *self.warnings, *self._spread_warnings(self.current(), self.spreads)]),
            applied=sorted(self.applied_names),
            audited=sorted(self.audited),
            failed=sorted(self.failed),
            result="patched" if patch else "unchanged",
        )

    def _spread_warnings(self, obj: dict[str, Any], spreads: list[tuple[str, str]]) -> list[str]:
        """What each required spread says of ``obj``: too few eligible domains for its replicas.
        Not clipped: ``finish`` clips every warning (once: clipping twice changes nothing)."""
        said: list[str] = []
        for name, key in spreads:
            text = placement.spread_warning(obj, target=self.target, topology_key=key, cluster=self.cluster)
            if text is not None:
                said.append(f"{name}: {text}")
        return said

    def diverged(self) -> Outcome:
        """Policies that keep undoing each other (two ``replace`` policies on one field
        group): an engine error for this object, admitted unchanged."""
        fighting = sorted(set(self.changed_in_pass))
        text = f"policies never settle ({', '.join(fighting)}); object admitted unchanged"
        return Outcome(
            object=self.original,
            patch=[],
            warnings=clip_all([*self.failures, *self.warnings, text]),
            failed=sorted(self.failed),
            result="error",
            error=text,
        )


def _summary(ops: list[dict[str, Any]]) -> str:
    """``add /spec/template/spec/affinity, replace /spec/strategy`` (clipped later)."""
    if not ops:
        return "change nothing visible"
    return ", ".join(f"{op['op']} {op['path']}" for op in ops)
