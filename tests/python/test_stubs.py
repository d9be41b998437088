"""python/cann_dist/_C.pyi against the compiled module it types: every public name of cann_dist._C
(functions, classes, their methods and properties) is in the stub, and the stub names nothing _C
lacks. A binding added to src/python/module.cc without regenerating the stub fails here
(docs/python.md, "Installing", says how to regenerate it)."""
import ast
import inspect
import os

import pytest

cann_dist = pytest.importorskip("cann_dist")
_C = cann_dist._C

STUB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "cann_dist", "_C.pyi")


def public(name):
    return not name.startswith("_")


def stub_names():
    """{top-level name: set of member names (None for a non-class)} from the stub's syntax tree."""
    tree = ast.parse(open(STUB).read(), STUB)
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    members.update(t.id for t in item.targets if isinstance(t, ast.Name))
            names[node.name] = {m for m in members if public(m)}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = None
        elif isinstance(node, ast.Assign):
            names.update({t.id: None for t in node.targets if isinstance(t, ast.Name)})
    return {n: m for n, m in names.items() if public(n)}


def module_names():
    names = {}
    for name, value in vars(_C).items():
        if not public(name) or inspect.ismodule(value):
            continue
        if inspect.isclass(value):
            names[name] = {m for m in vars(value) if public(m)}
        else:
            names[name] = None
    return names


def test_the_stub_names_exactly_what_the_module_has():
    stub, module = stub_names(), module_names()
    assert sorted(set(module) - set(stub)) == [], "in cann_dist._C, not in _C.pyi: regenerate the stub"
    assert sorted(set(stub) - set(module)) == [], "in _C.pyi, not in cann_dist._C"
    for name, members in module.items():
        if members is None:
            continue
        assert stub[name] is not None, f"{name} is a class in _C, not in the stub"
        assert sorted(members - stub[name]) == [], f"members of _C.{name} missing from _C.pyi"
        assert sorted(stub[name] - members) == [], f"members of {name} in _C.pyi that _C lacks"


def test_the_stub_ships_with_the_package_marker():
    assert os.path.isfile(os.path.join(os.path.dirname(STUB), "py.typed"))
