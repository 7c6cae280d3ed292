"""Adam and RMSprop with ``torch.optim``'s arithmetic and checkpoint layout, without its wrappers.

Every ``torch.optim`` optimizer's ``__init__`` and ``step`` go through wrappers that import
``torch._dynamo`` on first use: 1.0-1.4 s of a run's start on a 2-core CPU (BENCHMARKS.md), more than
warpsci's own start-up, for a compiler a run without ``compile`` never calls. These classes do the
same arithmetic with the same tensor operations:

- on the CPU, ``torch.optim.Adam``'s and ``RMSprop``'s single-tensor loops (their default there),
  operation for operation, so that results are bit-identical;
- on CUDA, capturable (the learning rate and the step counts are device tensors, so that a CUDA
  graph replays an update with the current learning rate): Adam is torch's fused kernel
  (``torch._fused_adam_``, what ``torch.optim.Adam(fused=True)`` launches: one launch for every
  parameter), RMSprop torch's ``foreach`` sequence.

Adam's :meth:`~Adam.clipped_step` clips the gradients to a global norm and steps in one kernel
where the parameters lie back to back in one buffer (:func:`flatten_parameters`, which the trainer
applies on CUDA) and so do their gradients (the fused loss's): at 2,048 Cartpole environments a
minibatch's clipping and step were a dozen launches, 27 us of an H100's time. Elsewhere it is
``torch.nn.utils.clip_grad_norm_`` and :meth:`~Optimizer.step`.

``state_dict()`` and ``load_state_dict()`` use ``torch.optim``'s layout, so checkpoints written with
``torch.optim`` load here and the other way round. Only what warpsci trains with is supported: no
weight decay, momentum, AMSGrad or centring.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from warpsci.distributed import contiguous_span

#: Adam's betas (Kingma and Ba's defaults, as torch's).
ADAM_BETAS = (0.9, 0.999)
#: The most parameters :meth:`Adam.clipped_step` takes through its kernel (whose programs each read
#: every gradient for the norm); larger networks go through torch's kernels.
FLAT_STEP_MAX_PARAMETERS = 1 << 17


def flatten_parameters(parameters: list[torch.Tensor]) -> torch.Tensor:
    """Move ``parameters`` (same dtype and device) into one new contiguous buffer, in order, each
    becoming a view of it with its values kept; returns the buffer. Modules keep their parameter
    objects, so optimizers, checkpoints and CUDA graphs built afterwards see nothing else change."""
    flat = torch.cat([parameter.detach().reshape(-1) for parameter in parameters])
    offset = 0
    for parameter in parameters:
        parameter.data = flat[offset : offset + parameter.numel()].view_as(parameter)
        offset += parameter.numel()
    return flat


class Optimizer:
    """What Adam and RMSprop share: one parameter group, per-parameter state, the checkpoint layout."""

    #: State tensors kept per parameter besides ``step``, in ``state_dict`` order.
    buffers: tuple[str, ...] = ()
    #: The hyperparameters a ``state_dict``'s parameter group carries, with their default values
    #: (an instance's own, with the constructor's arguments, are ``self.defaults``).
    defaults: dict[str, Any] = {}

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float | torch.Tensor,
        capturable: bool,
        **hyperparameters: Any,
    ) -> None:
        self.defaults = {**type(self).defaults, **hyperparameters}
        self.params = list(params)
        if not self.params:
            raise ValueError("the optimizer got no parameters")
        self.capturable = capturable
        device = self.params[0].device
        if capturable and device.type == "cpu":
            raise ValueError("capturable optimizers need their parameters on a CUDA device")
        group = {**self.defaults, "lr": lr, "capturable": capturable, "params": self.params}
        self.param_groups = [group]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}
        for param in self.params:
            # As torch.optim: a float32 step on the parameter's device when capturable, else on the CPU.
            step = torch.zeros((), dtype=torch.float32, device=device if capturable else "cpu")
            entry = {"step": step}
            for name in self.buffers:
                entry[name] = torch.zeros_like(param, memory_format=torch.preserve_format)
            self.state[param] = entry

    def clipped_step(self, max_norm: float) -> None:
        """Clip the gradients to ``max_norm`` in global norm (as ``torch.nn.utils.clip_grad_norm_``)
        and take a step."""
        torch.nn.utils.clip_grad_norm_(self._with_grads(), max_norm)
        self.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.params:
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            elif param.grad.grad_fn is not None:
                param.grad.detach_().zero_()
            else:
                # As torch.optim does: a gradient without history (possibly a view, as the fused
                # loss path sets them) is zeroed in place without detaching.
                param.grad.requires_grad_(False)
                param.grad.zero_()

    def _with_grads(self) -> list[torch.Tensor]:
        return [param for param in self.params if param.grad is not None]

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim``'s layout: parameters numbered in order, state by number."""
        index = {param: number for number, param in enumerate(self.params)}
        group = {key: value for key, value in self.param_groups[0].items() if key != "params"}
        group["params"] = list(range(len(self.params)))
        state = {index[param]: dict(entry) for param, entry in self.state.items()}
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a ``state_dict`` of this class or of the ``torch.optim`` optimizer of the same name:
        the learning rate, step counts and moments (copied into this optimizer's tensors, so they
        stay where it keeps them; a parameter with no saved state starts afresh). The other
        hyperparameters (betas, eps, alpha) stay the constructor's."""
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(
                f"the optimizer state holds {sum(len(group['params']) for group in groups)} parameters "
                f"in {len(groups)} groups; this optimizer has {len(self.params)} in one"
            )
        lr = groups[0]["lr"]
        group = self.param_groups[0]
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(float(lr))
        else:
            group["lr"] = float(lr)
        for number, param in zip(groups[0]["params"], self.params, strict=True):
            saved = state_dict["state"].get(number)
            entry = self.state[param]
            if saved is None:  # torch.optim keeps no state before a parameter's first step
                for tensor in entry.values():
                    tensor.zero_()
                continue
            for name in self.buffers:
                if tuple(saved[name].shape) != tuple(param.shape):
                    raise ValueError(
                        f"the optimizer state's {name} of parameter {number} has shape "
                        f"{tuple(saved[name].shape)}; the parameter has {tuple(param.shape)}"
                    )
            entry["step"].copy_(torch.as_tensor(saved["step"], dtype=torch.float32))
            for name in self.buffers:
                entry[name].copy_(saved[name])


class Adam(Optimizer):
    """Adam with betas (0.9, 0.999), ``eps`` added to the root of the second moment (torch's form).

    Args:
        params: The parameters to train.
        lr: Learning rate (a float; a device tensor when ``capturable``, read at every step).
        eps: Added to the denominator. warpsci uses 1e-5, CleanRL's.
        capturable: Device tensors for the step and learning rate, and torch's fused kernel (CUDA).
    """

    buffers = ("exp_avg", "exp_avg_sq")
    defaults = {
        "betas": ADAM_BETAS,
        "eps": 1e-8,
        "weight_decay": 0,
        "amsgrad": False,
        "maximize": False,
        "foreach": None,
        "differentiable": False,
        "fused": None,
        "decoupled_weight_decay": False,
    }

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float | torch.Tensor = 1e-3,
        eps: float = 1e-8,
        capturable: bool = False,
    ) -> None:
        super().__init__(params, lr, capturable, eps=eps, fused=True if capturable else None)
        # Parameters held flat on CUDA: the moments flat alike, for clipped_step.
        self._flat: tuple[torch.Tensor, ...] | None = None
        # Detached: a view with autograd history would keep the parameters' gradient accumulators
        # alive from here, bound to this stream (a captured backward then fails on them).
        span = contiguous_span([param.detach() for param in self.params]) if capturable else None
        if span is not None and span.numel() <= FLAT_STEP_MAX_PARAMETERS:
            moments = [torch.zeros_like(span) for _ in self.buffers]
            offset = 0
            for param in self.params:
                for name, moment in zip(self.buffers, moments, strict=True):
                    self.state[param][name] = moment[offset : offset + param.numel()].view_as(param)
                offset += param.numel()
            self._flat = (span, *moments)

    @torch.no_grad()
    def clipped_step(self, max_norm: float) -> None:
        """Clip the gradients to ``max_norm`` in global norm and step: one kernel
        (:func:`warpsci.optimizer_kernels.clipped_adam`) where the parameters are held flat
        (capturable, :func:`flatten_parameters`), their gradients gathered into one buffer first
        unless they lie back to back already (the fused loss's); else as
        :meth:`Optimizer.clipped_step`. (The kernel leaves ``.grad`` unclipped, torch's clipping
        clips it in place: nothing in warpsci reads it after the step.)"""
        grads = [param.grad for param in self.params]
        flat = self._flat is not None and isinstance(self.param_groups[0]["lr"], torch.Tensor)
        if not flat or any(grad is None for grad in grads):
            super().clipped_step(max_norm)
            return
        flat_grad = contiguous_span(grads)
        if flat_grad is None:  # gradients from autograd: gathered into one buffer
            flat_grad = torch.cat([grad.reshape(-1) for grad in grads])
        steps = [self.state[param]["step"] for param in self.params]
        torch._foreach_add_(steps, 1)
        group = self.param_groups[0]
        clipped_adam_step(
            flat_grad, *self._flat, steps[0], group["lr"], max_norm, group["betas"], group["eps"]
        )

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        (beta1, beta2), eps, lr = group["betas"], group["eps"], group["lr"]
        params = self._with_grads()
        states = [self.state[param] for param in params]
        if self.capturable:
            steps = [state["step"] for state in states]
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(
                params,
                [param.grad for param in params],
                [state["exp_avg"] for state in states],
                [state["exp_avg_sq"] for state in states],
                [],
                steps,
                amsgrad=False,
                lr=lr,
                beta1=beta1,
                beta2=beta2,
                weight_decay=0.0,
                eps=eps,
                maximize=False,
                grad_scale=None,
                found_inf=None,
            )
            return
        lr = float(lr)
        for param, state in zip(params, states, strict=True):
            grad, exp_avg, exp_avg_sq = param.grad, state["exp_avg"], state["exp_avg_sq"]
            state["step"] += 1
            step = state["step"].item()
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step_size = lr / (1 - beta1**step)
            bias_correction2_sqrt = (1 - beta2**step) ** 0.5
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)


def clipped_adam_step(
    grad: torch.Tensor,
    param: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    step: torch.Tensor,
    lr: torch.Tensor,
    max_norm: float,
    betas: tuple[float, float],
    eps: float,
) -> None:
    """Clip the flat ``grad`` to ``max_norm`` in norm (as read; it is left as it was) and take one
    Adam step of the flat ``param``, ``exp_avg`` and ``exp_avg_sq`` (all of one length); ``step``
    (the step count, this step included, float32) and ``lr``: one-element tensors. One launch of
    :func:`warpsci.optimizer_kernels.clipped_adam` (CUDA tensors, or CPU ones under
    ``TRITON_INTERPRET=1``)."""
    from warpsci.optimizer_kernels import clipped_adam

    block = 2048
    clipped_adam[(-(-param.numel() // block),)](
        grad, param, exp_avg, exp_avg_sq, step, lr, param.numel(), float(max_norm),
        float(betas[0]), float(betas[1]), float(eps), BLOCK=block, num_warps=8,
    )  # fmt: skip


class RMSprop(Optimizer):
    """RMSprop without momentum or centring: ``eps`` added to the root of the running mean square.

    Args:
        params: The parameters to train.
        lr: Learning rate (a float; a device tensor when ``capturable``, read at every step).
        alpha: Smoothing constant of the running mean square (0.99, as Stable-Baselines3's A2C).
        eps: Added to the denominator.
        capturable: Device tensors for the step and learning rate, torch's ``foreach`` operations (CUDA).
    """

    buffers = ("square_avg",)
    defaults = {
        "alpha": 0.99,
        "eps": 1e-8,
        "weight_decay": 0,
        "momentum": 0,
        "centered": False,
        "foreach": None,
        "maximize": False,
        "differentiable": False,
    }

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float | torch.Tensor = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        capturable: bool = False,
    ) -> None:
        super().__init__(params, lr, capturable, alpha=alpha, eps=eps)

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        alpha, eps, lr = group["alpha"], group["eps"], group["lr"]
        params = self._with_grads()
        states = [self.state[param] for param in params]
        if self.capturable:
            grads = [param.grad for param in params]
            square_avgs = [state["square_avg"] for state in states]
            torch._foreach_add_([state["step"] for state in states], 1)
            torch._foreach_mul_(square_avgs, alpha)
            torch._foreach_addcmul_(square_avgs, grads, grads, value=1 - alpha)
            avg = torch._foreach_sqrt(square_avgs)
            torch._foreach_add_(avg, eps)
            torch._foreach_div_(avg, -lr)
            torch._foreach_addcdiv_(params, grads, avg)
            return
        lr = float(lr)
        for param, state in zip(params, states, strict=True):
            grad, square_avg = param.grad, state["square_avg"]
            state["step"] += 1
            square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
            avg = square_avg.sqrt().add_(eps)
            param.addcdiv_(grad, avg, value=-lr)
