"""The registry of environments: ``warpsci.make(id)`` and ``gymnasium.make_vec("warpsci/<id>")``."""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from typing import Any

import gymnasium
import torch

from warpsci.environment import EnvironmentDefinition
from warpsci.vector_env import WarpVectorEnv, dataclass_replace

#: Prefix of warpsci's ids in Gymnasium's registry.
GYMNASIUM_NAMESPACE = "warpsci"

_REGISTRY: dict[str, EnvironmentDefinition] = {}


def register(definition: EnvironmentDefinition) -> None:
    """Add an environment to warpsci's registry and to Gymnasium's (as ``warpsci/<name>``)."""
    if definition.name in _REGISTRY and _REGISTRY[definition.name] is not definition:
        raise ValueError(f"an environment named {definition.name!r} is already registered")
    _REGISTRY[definition.name] = definition
    gymnasium_id = f"{GYMNASIUM_NAMESPACE}/{definition.name}"
    if gymnasium_id not in gymnasium.registry:
        gymnasium.register(
            id=gymnasium_id,
            vector_entry_point=_gymnasium_vector_entry_point(definition.name),
            max_episode_steps=None,
        )


def unregister(env_id: str) -> None:
    """Remove an environment from warpsci's registry and Gymnasium's (to register another
    definition under its name, e.g. an edited one in a notebook); unknown ids are ignored."""
    name = env_id.removeprefix(GYMNASIUM_NAMESPACE + "/")
    _REGISTRY.pop(name, None)
    gymnasium.registry.pop(f"{GYMNASIUM_NAMESPACE}/{name}", None)


def registered_ids() -> list[str]:
    """Ids of every registered environment, in registration order."""
    return list(_REGISTRY)


def get_definition(env_id: str) -> EnvironmentDefinition:
    """The definition registered under ``env_id`` (``"warpsci/"`` prefix allowed), or a user's
    environment named as ``"package.module:ATTRIBUTE"`` (an EnvironmentDefinition; the module is
    imported from the current folder or the installed packages and the definition registered)."""
    if ":" in env_id:
        return _import_definition(env_id)
    name = env_id.removeprefix(GYMNASIUM_NAMESPACE + "/")
    if name not in _REGISTRY:
        nearest = difflib.get_close_matches(name, registered_ids(), n=1)
        hint = f" (did you mean {nearest[0]!r}?)" if nearest else ""
        raise ValueError(
            f"unknown environment id {env_id!r}{hint}; registered: {registered_ids()}. Your own "
            "environment: give it as package.module:ATTRIBUTE"
        )
    return _REGISTRY[name]


def _import_definition(reference: str) -> EnvironmentDefinition:
    """Import ``"module:attribute"`` and register the EnvironmentDefinition it names."""
    module_name, _, attribute = reference.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"cannot import {module_name!r} for environment {reference!r} ({error}); run from the folder "
            "that holds it, or install its package"
        ) from None
    definition = getattr(module, attribute, None)
    if not isinstance(definition, EnvironmentDefinition):
        found = "nothing" if definition is None else f"a {type(definition).__name__}"
        raise ValueError(
            f"{reference!r}: {module_name}.{attribute} is {found}, not a warpsci.EnvironmentDefinition"
        )
    if _REGISTRY.get(definition.name) is not definition:
        register(definition)
    return definition


def make(
    env_id: str,
    num_envs: int = 1,
    device: str | torch.device = "cpu",
    seed: int | None = 0,
    params: Any | None = None,
    **options: Any,
) -> WarpVectorEnv:
    """Build ``num_envs`` copies of a registered environment on ``device``: a Gymnasium
    :class:`~warpsci.vector_env.WarpVectorEnv` for an environment of one group, a
    :class:`~warpsci.multi_agent_env.MultiAgentVectorEnv` (tensors per group) for several.

    Args:
        env_id: A registered id such as ``"CartPole-v1"``.
        num_envs: Number of environments (>= 1). Default 1.
        device: ``"cpu"`` or ``"cuda"``/``"cuda:N"``. Default ``"cpu"``.
        seed: Seed of the first reset. Default 0.
        params: A params dataclass instance, or a dict of fields to change from the defaults.
        **options: Passed to :class:`~warpsci.vector_env.WarpVectorEnv` (``copy``,
            ``check_actions``, ``threads_per_block``, ``block_observation``).
    """
    definition = get_definition(env_id)
    if isinstance(params, dict):
        params = dataclass_replace(definition.default_params(), **params)
    environment_class = WarpVectorEnv
    resolved = params if params is not None else definition.default_params()
    # Params of the wrong type are left for the vector environment to refuse with a clear message.
    if isinstance(resolved, definition.params_type):
        from warpsci.multi_agent_env import vector_env_class

        environment_class = vector_env_class(definition.agent_groups(resolved))
    return environment_class(
        definition, num_envs=num_envs, device=device, seed=seed, params=params, **options
    )


def memory_plan(env_id: str, num_envs: int, params: Any | None = None) -> dict[str, int]:
    """Bytes that ``make(env_id, num_envs, params=params)`` places in device memory, by array
    (``state.<field>``, ``buffers.<name>``), computed from the shapes without allocating anything.
    ``make`` refuses, with a MemoryError naming the largest arrays, what does not fit in the memory
    free on its device."""
    from warpsci.memory import nbytes
    from warpsci.vector_env import array_layout

    definition = get_definition(env_id)
    if isinstance(params, dict):
        params = dataclass_replace(definition.default_params(), **params)
    resolved = params if params is not None else definition.default_params()
    layout = array_layout(definition, definition.agent_groups(resolved), int(num_envs))
    return {name: nbytes(shape, dtype) for name, (shape, dtype) in layout.items()}


def _gymnasium_vector_entry_point(name: str):
    def entry_point(num_envs: int = 1, **kwargs: Any) -> WarpVectorEnv:
        return make(name, num_envs=num_envs, **kwargs)

    return entry_point
