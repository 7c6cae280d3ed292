"""Environments shipped with warpsci, each one module built on :mod:`warpsci.environment`."""

from warpsci.envs.acrobot import ACROBOT, AcrobotParams
from warpsci.envs.cartpole import CARTPOLE, CartPoleParams
from warpsci.envs.catalysis import (
    CATALYSIS_ONE_ATOM,
    CATALYSIS_TWO_ATOM,
    CatalysisParams,
    CatalysisTwoAtomParams,
)
from warpsci.envs.covid_economy import COVID_ECONOMY
from warpsci.envs.covid_economy_data import CovidEconomyParams
from warpsci.envs.mountain_car import MOUNTAIN_CAR, MountainCarParams
from warpsci.envs.mountain_car_continuous import MOUNTAIN_CAR_CONTINUOUS, MountainCarContinuousParams
from warpsci.envs.pendulum import PENDULUM, PendulumParams
from warpsci.envs.tag_continuous import TAG_CONTINUOUS, TagContinuousParams
from warpsci.envs.tag_gridworld import TAG_GRIDWORLD, TagGridworldParams

#: Every environment shipped with warpsci, in registration order.
BUILTIN_ENVIRONMENTS = (
    CARTPOLE,
    ACROBOT,
    MOUNTAIN_CAR,
    MOUNTAIN_CAR_CONTINUOUS,
    PENDULUM,
    TAG_GRIDWORLD,
    TAG_CONTINUOUS,
    CATALYSIS_ONE_ATOM,
    CATALYSIS_TWO_ATOM,
    COVID_ECONOMY,
)

__all__ = [
    "ACROBOT",
    "AcrobotParams",
    "BUILTIN_ENVIRONMENTS",
    "CARTPOLE",
    "CATALYSIS_ONE_ATOM",
    "CATALYSIS_TWO_ATOM",
    "COVID_ECONOMY",
    "CovidEconomyParams",
    "CatalysisParams",
    "CatalysisTwoAtomParams",
    "CartPoleParams",
    "MOUNTAIN_CAR",
    "MOUNTAIN_CAR_CONTINUOUS",
    "MountainCarContinuousParams",
    "MountainCarParams",
    "PENDULUM",
    "PendulumParams",
    "TAG_CONTINUOUS",
    "TAG_GRIDWORLD",
    "TagContinuousParams",
    "TagGridworldParams",
]
