"""The rule catalog: one module per family, one function per rule (ruff's layout).

Importing this package registers every rule; :func:`all_rules` lists them in code order.
"""

from cudastack.checks import cuda as _cuda
from cudastack.checks import env as _env
from cudastack.checks import ldd as _ldd
from cudastack.checks import pkg as _pkg
from cudastack.checks.registry import Context, Rule, SkipCheck, all_rules, get_rule, run_rules

__all__ = ["Context", "Rule", "SkipCheck", "all_rules", "get_rule", "run_rules"]
del _cuda, _env, _ldd, _pkg
