"""caravan's task-side helpers for Python training scripts.

The core (this package's modules other than ``caravan.pytorch``,
``caravan.elastic``, ``caravan.launch`` and ``caravan.rendezvous``) is
standard library only:

- ``caravan.checkpoint``: the checkpoint protocol of caravan's task driver
  (signal, atomic files, the ``caravan-checkpoint.json`` marker, skip markers,
  restore information);
- ``caravan.progress``: progress reports to the caravan planner, authenticated
  by the task's Nomad workload identity.

``caravan.pytorch`` saves and loads model and optimizer state through the
protocol; ``caravan.elastic`` and ``caravan.launch`` run
torch.distributed.elastic training under Nomad. They import torch when used.

A missing environment variable never stops training: the helper warns once
and carries on without that feature.
"""

from caravan.checkpoint import Checkpointer, RestoreInfo, restore_info
from caravan.progress import Reporter

__all__ = ["Checkpointer", "RestoreInfo", "Reporter", "restore_info"]
__version__ = "0.1.0"
