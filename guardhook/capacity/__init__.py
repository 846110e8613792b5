"""Whole-group feasibility on free node capacity, for the `group-capacity` policy.

`index.CapacityIndex` keeps node capacity as arrays, updated from the cluster view's change
notifications; `solver.fit_groups` answers how many whole LWS groups fit; `shapes` reads pod
templates. Nothing here knows of HTTP or admission requests.
"""

from guardhook.capacity.index import CapacityIndex, index_for
from guardhook.capacity.shapes import PodShape, shape_of_template
from guardhook.capacity.solver import Fit, GangDemand, GangFit, GroupDemand, fit_gangs, fit_groups

__all__ = [
    "CapacityIndex",
    "Fit",
    "GangDemand",
    "GangFit",
    "GroupDemand",
    "PodShape",
    "fit_gangs",
    "fit_groups",
    "index_for",
    "shape_of_template",
]
