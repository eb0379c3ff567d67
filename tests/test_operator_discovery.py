"""Operators are found without the engine importing them (issue 12): `simulator` does not import
`ops`; the registry fills at first use from the `ascend_sim.operators` entry-point group, so a
package of the user's own adds an operator with no change to this project."""
from __future__ import annotations

import subprocess
import sys
import textwrap


def _python(code: str, path: str | None = None) -> str:
    env = None
    if path is not None:
        import os
        env = dict(os.environ, PYTHONPATH=path + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_engine_does_not_import_the_operators():
    out = _python("""
        import sys, simulator
        from simulator import aclnn, acl, machine, api
        print('ops' in sys.modules)
        print(sorted(simulator.aclnn.REGISTRY))
        print('ops' in sys.modules)
        """)
    before, names, after = out.splitlines()
    assert before == "False" and after == "True"
    assert "SiluBackward" in names and "ConvolutionBackward" in names


def test_a_users_package_adds_an_operator(tmp_path):
    """A distribution on sys.path that declares an `ascend_sim.operators` entry point: its
    operator gets the two-phase functions and runs through simulator.run like ours."""
    pkg = tmp_path / "my_ops"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent('''
        import numpy as np
        from simulator.aclnn import OpDef, Param, Plan, register
        from simulator.kernel import DataCopy, GlobalTensor, HardEvent, SetFlag, TBuf, TPipe, TPosition, WaitFlag
        from simulator.program import KernelLaunch
        from ops.common import tensor_arg

        def body(src, dst, n):
            pipe = TPipe(); b = TBuf(TPosition.VECCALC); pipe.InitBuffer(b, n * 4)
            gs, gd = GlobalTensor(np.float32), GlobalTensor(np.float32)
            gs.SetGlobalBuffer(src); gd.SetGlobalBuffer(dst)
            t = b.Get(np.float32)
            DataCopy(t, gs, n)
            SetFlag(HardEvent.MTE2_MTE3, 0); WaitFlag(HardEvent.MTE2_MTE3, 0)
            DataCopy(gd, t, n)

        def plan(a, profile, tiling):
            x, y = a["self"], a["out"]
            return Plan(build=lambda ws: [KernelLaunch("Copy", body, 1, "vector",
                                                           (tensor_arg(x, "self"), tensor_arg(y, "out"), x.numel()))])

        register(OpDef("MyCopy", [Param("self", "tensor"), Param("out", "tensor", output=True)],
                       lambda a, p: None, plan, lambda i: {"out": (i["self"].shape, i["self"].dtype)}))
        '''))
    dist = tmp_path / "my_ops-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-ops\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[ascend_sim.operators]\nmy_ops = my_ops\n")
    out = _python("""
        import numpy as np, simulator
        from simulator import aclnn
        r = simulator.run("MyCopy", self=np.arange(64, dtype=np.float32))
        print(np.array_equal(r.out, np.arange(64, dtype=np.float32)), r.cycles > 0)
        print(hasattr(aclnn, "aclnnMyCopyGetWorkspaceSize"), "SiluBackward" in aclnn.REGISTRY)
        """, str(tmp_path))
    assert out.split() == ["True", "True", "True", "True"]
