"""The native core (Rust, crates/py). Use the functions of `longhaul` instead."""

from typing import Any, Dict, List, Optional, Tuple

__version__: str

def example() -> str: ...
def run(
    source: str, kind: str, label: str, seed: Optional[int] = None, outdir: Optional[str] = None
) -> Dict[str, Any]: ...
def load_sweep(path: str, seed: Optional[int] = None) -> Dict[str, Any]: ...
def make_sweep(
    source: str,
    kind: str,
    label: str,
    grid_json: str,
    variants_json: str,
    name: Optional[str] = None,
    seed: Optional[int] = None,
) -> Dict[str, Any]: ...
def run_point(
    n: int,
    params_json: str,
    document_json: str,
    label: str,
    warmup_s: float,
    seed: Optional[int] = None,
) -> str: ...
def studies() -> List[Tuple[str, str]]: ...
def run_study(
    name: str, out: str, jobs: Optional[int] = None, seed: Optional[int] = None
) -> List[Tuple[str, str]]: ...
