"""Training configuration: one typed dataclass, loadable from YAML and overridable from the CLI."""

from __future__ import annotations

import dataclasses
import functools
import typing
from pathlib import Path
from typing import Any

import yaml

from warpsci.config_fields import check_range, coerce, unknown_key_message

#: Accepted values of ``TrainConfig.algo``.
ALGORITHMS = ("ppo", "a2c")
#: Accepted values of ``TrainConfig.optimizer``.
OPTIMIZERS = ("adam", "rmsprop")
#: Accepted values of ``TrainConfig.activation`` (:data:`warpsci.networks.ACTIVATIONS`).
ACTIVATION_NAMES = ("tanh", "relu")
#: The hyperparameters a ``groups:`` block may set per agent group.
GROUP_KEYS = (
    "learning_rate",
    "anneal_lr",
    "ent_coef",
    "ent_coef_final",
    "learning_rate_final",
    "vf_coef",
    "clip_coef",
    "clip_vloss",
    "max_grad_norm",
    "optimizer",
    "hidden_sizes",
    "activation",
    "shared_trunk",
    "bf16",
    "log_std_init",
    "norm_adv",
    "gamma",
    "gae_lambda",
    "update_epochs",
    "num_minibatches",
    "normalize_obs",
    "normalize_reward",
    "neg_pos_env_ratio",
)


@dataclasses.dataclass
class TrainConfig:
    """Everything a PPO or A2C run needs. Field names follow CleanRL's ``ppo.py``."""

    env_id: str = "CartPole-v1"
    """Registered environment id."""
    algo: str = "ppo"
    """``"ppo"`` (clipped surrogate, minibatch epochs) or ``"a2c"`` (one gradient step per rollout)."""
    device: str = "cpu"
    """``"cpu"`` or ``"cuda"``/``"cuda:N"``."""
    seed: int = 1
    """Seed of the environments, the network initialisation and action sampling."""
    num_envs: int = 8
    """Environments stepped in parallel."""
    num_steps: int = 128
    """Steps per environment in one rollout; a rollout holds ``num_envs * num_steps`` transitions."""
    total_timesteps: int = 500_000
    """Environment steps (summed over environments) to train for."""
    learning_rate: float = 2.5e-4
    """Learning rate at the start of training."""
    optimizer: str = "adam"
    """``"adam"`` (eps 1e-5, as CleanRL) or ``"rmsprop"`` (alpha 0.99, eps 1e-5, as Stable-Baselines3's
    A2C)."""
    anneal_lr: bool = True
    """Decay the learning rate linearly over training, to ``learning_rate_final``."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE's lambda."""
    num_minibatches: int = 4
    """Minibatches per epoch; the rollout is split into this many (PPO; A2C uses the whole rollout)."""
    update_epochs: int = 4
    """Passes over the rollout per update (PPO; A2C makes one)."""
    norm_adv: bool = True
    """Normalise advantages within each minibatch."""
    clip_coef: float = 0.2
    """PPO's surrogate clipping coefficient."""
    clip_vloss: bool = True
    """Clip the value loss around the old values, as in PPO's reference implementation (PPO only)."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    target_kl: float | None = None
    """Stop an update's epochs early when the approximate KL exceeds this; None never stops."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Widths of the hidden layers of the actor and the critic."""
    activation: str = "tanh"
    """The hidden layers' activation: ``"tanh"`` (CleanRL's) or ``"relu"`` (WarpDrive's)."""
    shared_trunk: bool = False
    """One stack of hidden layers for the actor and the critic, with a policy head and a value head
    on it (WarpDrive's network, about half the arithmetic of two), instead of two separate
    networks; its values are then computed during the rollout, in the actor's pass."""
    log_std_init: float = 0.0
    """Initial log standard deviation of the Gaussian policy (Box action spaces only)."""
    normalize_obs: bool = False
    """Normalise observations by running mean and variance (kept with the policy's weights)."""
    normalize_reward: bool = False
    """Divide rewards by the running standard deviation of the discounted return."""
    capture_graphs: bool = True
    """On CUDA, replay each iteration's rollout and advantage estimation, and the update (unless
    ``target_kl`` is set), as CUDA graphs captured on the second iteration; False runs everything
    eagerly, for debugging. Ignored on the CPU."""
    tf32: bool = True
    """On CUDA, let float32 matrix products use TensorFloat-32 tensor cores
    (``torch.set_float32_matmul_precision("high")``, the precision JAX uses by default on GPUs):
    several times faster update GEMMs, 10-bit mantissas in the products. False keeps full float32.
    Ignored on the CPU."""
    fused_mlp: bool = True
    """On CUDA, run two-hidden-layer tanh networks of up to 128 units (the default shape) through
    the Triton kernels of :mod:`warpsci.fused_mlp`, forward and backward, so that their hidden
    activations are never written to device memory (H100, Tag gridworld at 2,000 x 1,000 agents,
    A2C: update 63 -> 19 ms, end to end 0.20M -> 0.65M env steps/s; BENCHMARKS.md). Outputs and
    gradients equal PyTorch's up to TF32 rounding. A network whose kernels do not fit the GPU's
    shared memory under any launch setting runs PyTorch's layers. With ``compile`` the kernels stay
    inside the compiled loss (as torch custom operators). With a ``Discrete`` action space (no
    action masks, observation normalisation or shared trunk), PPO's and A2C's losses are
    computed inside the backward kernels (:mod:`warpsci.fused_loss`; H100, PPO on Cartpole at 2K
    environments: 58.2M steps/s end to end, against 50.8M with the autograd loss compiled). Other
    networks and the CPU use PyTorch's layers; ``--no-fused-mlp`` does everywhere."""
    bf16: bool = False
    """Run the networks' matrix products in bfloat16 (``torch.autocast``), in the rollout's forward
    passes, the critic's pass and the update; weights, optimizer state and losses stay float32,
    gradients are float32 tensors computed from bfloat16 products, and every network output is
    returned as float32. Half the memory traffic of the hidden activations and twice the
    tensor-core rate of TF32, for 8-bit mantissas in the products. PyTorch's layers run under
    ``torch.autocast``; networks that the fused kernels run (``fused_mlp`` on CUDA) take their
    operands rounded to bfloat16 there, loss inside the kernels included. Works on the CPU too
    (fast where the CPU has bfloat16 instructions, e.g. AMX)."""
    compile: bool = False
    """``torch.compile`` (inductor) the update's loss with its backward pass: the minibatch gather,
    the element-wise work and the reductions are fused into a few generated kernels instead of
    about a hundred torch launches per minibatch. Compilation adds tens of seconds to the start of a
    run (cached on disk by torch afterwards) and needs Triton on CUDA, a C++ compiler on the CPU.
    Results equal the eager run's up to float rounding. The rollout's forward pass stays eager: on
    the H100, compiling it made the rollout slower. Where the loss runs inside the fused kernels
    (``fused_mlp``) there is nothing left for it to compile in the update."""
    neg_pos_env_ratio: float | None = None
    """WarpDrive's down-sampling of unsuccessful trajectories, published with HDRL-FP's
    ``surface_double_grids`` scenario (ratio 5), for environments of one agent: after each
    rollout, every environment whose episode terminated within it (not by a time limit: in an
    environment where only reaching the goal terminates, a success) is trained on, and at most
    this many times as many others, drawn at random; the rest are weighted out of that iteration's
    loss (PPO's minibatches keep their size and weigh the rows they hold). A rollout without a
    terminated episode trains on every environment; with several training processes each decides
    for its own environments, as WarpDrive's does per GPU. Meant for sparse successes over
    whole-episode rollouts (``num_steps`` at least the episode length). None (default): every row."""
    target_return: float | None = None
    """Stop as soon as the mean return of the last 100 episodes reaches this; None trains to the end."""
    checkpoint_every: int = 50
    """Write a checkpoint every this many iterations (and at the end); 0: not by iterations."""
    checkpoint_every_s: float = 300.0
    """Also write one when this many seconds have passed since the last (default 5 minutes); 0: not
    by time. Runs also checkpoint on SIGTERM and SIGINT."""
    keep_checkpoints: int = 3
    """How many of the newest checkpoints a run keeps in ``RUN_DIR/checkpoints/``
    (``RUN_DIR/checkpoint.pt`` is the newest)."""
    track: bool = False
    """Also log the metrics to Weights & Biases (``pip install wandb``; ``wandb login`` first, or
    ``WANDB_MODE=offline``). A resumed run continues the same W&B run."""
    wandb_project: str = "warpsci"
    """W&B project of a tracked run."""
    wandb_entity: str | None = None
    """W&B entity (user or team) of a tracked run; None: the logged-in user's default."""
    env_params: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Overrides of the environment's params dataclass fields."""
    ent_coef_final: float | None = None
    """Anneal the entropy coefficient linearly from ``ent_coef`` to this over training; None keeps
    it constant."""
    learning_rate_final: float = 0.0
    """Where ``anneal_lr``'s linear decay ends, at the last iteration (default 0, CleanRL's
    schedule)."""
    groups: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """Per agent group (multi-agent environments), overrides of the hyperparameters in
    :data:`GROUP_KEYS`, e.g. ``{"runner": {"learning_rate": 1e-4, "ent_coef": 0.05}}``. Each group is
    trained by its own policy and optimizer."""
    shared_policy: bool = False
    """Train one policy for every group (their observation and action spaces must be equal), as
    WarpDrive's Tag gridworld configuration does; ``groups`` overrides then do not apply."""

    def __post_init__(self) -> None:
        # Every field to its type (YAML and the CLI hand over text), then to its range.
        for field in dataclasses.fields(self):
            value = coerce(field.name, getattr(self, field.name), _field_types()[field.name])
            check_range(field.name, value)
            setattr(self, field.name, value)
        if any(width < 1 for width in self.hidden_sizes):
            raise ValueError(f"hidden_sizes must be positive widths, got {list(self.hidden_sizes)}")
        if self.batch_size % self.num_minibatches != 0:
            raise ValueError(
                f"num_envs * num_steps = {self.batch_size} must be divisible by "
                f"num_minibatches = {self.num_minibatches}"
            )
        if self.algo not in ALGORITHMS:
            raise ValueError(f"algo must be one of {list(ALGORITHMS)}, got {self.algo!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {list(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.activation not in ACTIVATION_NAMES:
            raise ValueError(f"activation must be one of {list(ACTIVATION_NAMES)}, got {self.activation!r}")
        if not isinstance(self.groups, dict) or not all(isinstance(v, dict) for v in self.groups.values()):
            raise ValueError(
                f"groups must map group names to mappings of hyperparameters, got {self.groups!r}"
            )
        for group, overrides in self.groups.items():
            unknown = sorted(set(overrides) - set(GROUP_KEYS))
            if unknown:
                raise ValueError(
                    f"groups.{group}: unknown key(s) {unknown}; a group may set {list(GROUP_KEYS)}"
                )
            try:  # each group's settings checked like the whole config's, now, not when training starts
                dataclasses.replace(self, groups={}, **overrides)
            except ValueError as error:
                raise ValueError(f"groups.{group}: {error}") from None

    def for_group(self, group: str) -> TrainConfig:
        """This config with the group's overrides applied (validated like the whole config)."""
        overrides = self.groups.get(group, {})
        if not overrides:
            return self
        return dataclasses.replace(self, **overrides)

    @property
    def batch_size(self) -> int:
        """Transitions per rollout."""
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        """Transitions per minibatch."""
        return self.batch_size // self.num_minibatches

    @property
    def num_iterations(self) -> int:
        """Rollout-and-update iterations needed for ``total_timesteps`` (at least one)."""
        return max(1, self.total_timesteps // self.batch_size)

    def to_dict(self) -> dict[str, Any]:
        """Plain dictionary (YAML-friendly: tuples become lists)."""
        data = dataclasses.asdict(self)
        data["hidden_sizes"] = list(self.hidden_sizes)
        data["groups"] = {
            name: {
                key: list(value) if isinstance(value, tuple) else value for key, value in overrides.items()
            }
            for name, overrides in self.groups.items()
        }
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build from a dictionary, rejecting unknown keys with the nearest accepted one."""
        names = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ValueError(unknown_key_message(unknown, names))
        return cls(**data)


@functools.cache
def _field_types() -> dict[str, Any]:
    """Each field's type, resolved from its annotation (a string under ``from __future__ import
    annotations``)."""
    return typing.get_type_hints(TrainConfig)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping from ``path``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {str(path)!r} does not exist")
    try:
        with path.open() as handle:
            data = yaml.safe_load(handle) or {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "not valid YAML"
        raise ValueError(f"config file {str(path)!r} is not valid YAML{where}: {problem}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"config file {str(path)!r} cannot be read: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"config file {str(path)!r} must hold a mapping of keys to values")
    return data


def save_yaml(data: dict[str, Any], path: str | Path) -> None:
    """Write ``data`` to ``path`` as YAML (atomically)."""
    from warpsci.checkpoint import atomic_write_bytes

    atomic_write_bytes(Path(path), yaml.safe_dump(data, sort_keys=False).encode())
