"""The hardware errors a user can fix, each with its exit status."""

from __future__ import annotations

from fwdasv.core.errors import EXIT_NO_DRIVER, EXIT_NOT_PERMITTED, UserError


class HardwareError(UserError):
    """A GPU state or setting the user can fix."""


class NoDriver(HardwareError):
    """No usable NVIDIA driver or GPU (no libnvidia-ml, driver not loaded, no GPU)."""

    exit_code = EXIT_NO_DRIVER


class NotPermitted(HardwareError):
    """A change that needs root (or NVML refused it for lack of permission)."""

    exit_code = EXIT_NOT_PERMITTED
