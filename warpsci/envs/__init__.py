"""Environments shipped with warpsci, each one module built on :mod:`warpsci.environment`."""

from warpsci.envs.cartpole import CARTPOLE, CartPoleParams

#: Every environment shipped with warpsci, in registration order.
BUILTIN_ENVIRONMENTS = (CARTPOLE,)

__all__ = ["BUILTIN_ENVIRONMENTS", "CARTPOLE", "CartPoleParams"]
