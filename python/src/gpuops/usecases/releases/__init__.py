"""Use cases of ``gpuops release``: promote a tag (or a model version) to an environment, roll
back, and read the history and the status. See :mod:`.engine` for the order of a release.

Each returns an :class:`~gpuops.usecases.outcome.Outcome` whose verdict the use case decides
(a refused gate, a failed rollout); the CLI only renders it."""

from __future__ import annotations

from gpuops.core import releasehistory as hist
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasepatch import image_ref, split_image
from gpuops.errors import InvalidInput
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.releases import config, withnodes
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.engine import Context, Deps, run
from gpuops.usecases.releases.gates import Gate, digest_gate, image_gate

__all__ = ["Deps", "promote", "resume", "rollback"]


def _one_deployment(env: Environment) -> None:
    """A strategy releases one Deployment (its canary is that Deployment's)."""
    if env.strategy is not None and len(env.deployments) > 1:
        raise InvalidInput(
            f"{env.source}: environments.{env.name}.strategy: a progressive release takes one "
            f"Deployment; {env.name} names {len(env.deployments)}",
            hint="give the environment one deployment, or split it into environments",
            field="config",
        )


def promote(request: m.PromoteRequest, deps: Deps) -> Outcome[m.ReleaseOutcome]:
    """Release ``tag`` and/or model version ``model`` to the environment."""
    env = config.load(request.target.config).environment(request.target.environment)
    _one_deployment(env)
    deps = deps.for_env(env)
    if request.tag is None and request.model is None:
        raise InvalidInput("promote needs --tag, --model or both", field="tag")
    if request.model is not None and env.model is None:
        raise InvalidInput(
            f"{env.source}: environment {env.name} declares no model mount "
            "(model: env, annotation or configmap), so --model cannot be released there",
            field="model",
        )

    def choose(ctx: Context) -> tuple[m.Wanted | None, list[Gate]]:
        now = ctx.live[0].content
        repository, tag, digest = split_image(now.image)
        model = request.model if request.model is not None else now.model
        if request.tag is not None:
            gate, digest = image_gate(deps.registry, env, request.tag)
            tag = request.tag
        elif repository == env.image and tag and digest:
            gate = Gate("image", True, f"unchanged: {now.image}")
        elif tag is not None and repository == env.image:
            gate, digest = image_gate(deps.registry, env, tag)
        else:
            raise InvalidInput(
                f"{env.name} runs {now.image}, not a tag of {env.image}: release a --tag first",
                field="model",
            )
        if digest is None or not gate.ok:  # no such tag: nothing to release
            return None, [gate]
        return m.Wanted(tag, digest, image_ref(env.image, tag, digest), model), [gate]

    return run(env, "promote", request.target, request.who, request.dry_run, choose, deps)


def rollback(
    request: m.RollbackRequest, deps: Deps, nodes: withnodes.NodeSide | None = None
) -> Outcome[m.ReleaseOutcome]:
    """Go back to the previous release, or to a tag from the history: no rebuild, the
    recorded digest and model version, through the same gates. ``with_nodes``: the nodes go
    back to the node record that release ran with first (:mod:`.withnodes`; ``nodes``: how
    the node history is reached, for tests)."""
    env = config.load(request.target.config).environment(request.target.environment)
    _one_deployment(env)
    deps = deps.for_env(env)

    def pick(ctx: Context) -> hist.Release:
        if request.to == hist.PREVIOUS:
            source = hist.previous(ctx.records, ctx.current)
            if source is None:
                raise InvalidInput(
                    f"{env.name} has no earlier successful release to go back to",
                    hint="see 'gpuops release history'",
                    field="to",
                )
            return source
        return hist.find_tag(ctx.records, request.to, ctx.current)

    if request.with_nodes is not None:
        return withnodes.rollback(env, request, deps, pick, nodes)

    def choose(ctx: Context) -> tuple[m.Wanted | None, list[Gate]]:
        source = pick(ctx)
        assert source.tag is not None and source.digest is not None  # noqa: S101 - candidates have both
        gate = digest_gate(deps.registry, env, source.tag, source.digest)
        image = image_ref(env.image, source.tag, source.digest)
        return m.Wanted(source.tag, source.digest, image, source.model, source), [gate]

    return run(env, "rollback", request.target, request.who, request.dry_run, choose, deps)


def resume(request: m.ResumeRequest, deps: Deps) -> Outcome[m.ReleaseOutcome]:
    """Go on with a release paused on an approval step, or (``reject``) restore the
    previous release (:mod:`.paused`)."""
    from gpuops.usecases.releases import paused  # noqa: PLC0415

    return paused.resume(request, deps)
