"""LLM judges for math benchmarks, as lm-evaluation-harness tasks.

Importing this package does nothing but define names: the SDKs, lm-eval and the
judge machinery load on first use, because the ``lm_eval`` CLI imports the
package (through its start-up hook) on every start.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
