"""The layer side is one folder per framework, one file per area (issue 45), as Keras 3's ``src/backend/<name>/``:
``harness/layerside/<framework>/`` holds ``__init__.py`` and one ``<area>.py`` per area of
``layer_conformance.protocol.AREAS``, the same file names in every folder. Each area file defines one public class,
deriving from that area's protocol, with only the methods and attributes the protocol declares (and private
helpers); ``__init__.py`` composes them into ``FrameworkAdapter``, which so derives from every protocol.

Read with ``ast``: no framework is imported. (Module and function sizes: tests/meta_tests/test_sizes.py.)"""
import ast

import pytest

from layer_conformance.frameworks import FRAMEWORKS
from layer_conformance.protocol import AREAS
from tests.support import ROOT

LAYERSIDE = ROOT / "harness" / "layerside"
# framework -> {area: why its folder has no such file}; an area a framework lacks still has its file (its class
# raises NotApplicable or keeps the protocol's placeholders), so none is left out today
ABSENT: dict[str, dict[str, str]] = {}


def _expected(framework: str) -> set[str]:
    return {"__init__.py"} | {f"{area}.py" for area in AREAS if area not in ABSENT.get(framework, {})}


def _tree(framework: str, file: str) -> ast.Module:
    return ast.parse((LAYERSIDE / framework / file).read_text())


def _public_classes(tree: ast.Module) -> list[ast.ClassDef]:
    return [n for n in tree.body if isinstance(n, ast.ClassDef) and not n.name.startswith("_")]


def _declared(protocol: type) -> set[str]:
    return {n for n in vars(protocol) if not (n.startswith("__") and n.endswith("__"))}


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_each_framework_folder_has_the_same_file_names(framework):
    folder = LAYERSIDE / framework
    assert folder.is_dir(), f"no folder {folder.relative_to(ROOT)}"
    have = {p.name for p in folder.glob("*.py")}
    assert have == _expected(framework), (f"{folder.relative_to(ROOT)}: missing {sorted(_expected(framework) - have)},"
                                          f" extra {sorted(have - _expected(framework))}")
    assert not [p for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"], "no sub-folders"


def test_the_absences_name_known_frameworks_and_areas_with_a_reason():
    for framework, areas in ABSENT.items():
        assert framework in FRAMEWORKS, framework
        for area, why in areas.items():
            assert area in AREAS and area != "core" and why.strip(), (framework, area)


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_each_area_file_is_one_class_of_its_protocol(framework):
    for area, protocol in AREAS.items():
        if area in ABSENT.get(framework, {}):
            continue
        tree = _tree(framework, f"{area}.py")
        classes = _public_classes(tree)
        assert len(classes) == 1, f"{framework}/{area}.py: one public class, found {[c.name for c in classes]}"
        cls = classes[0]
        assert [b.id for b in cls.bases if isinstance(b, ast.Name)] == [protocol.__name__], \
            f"{framework}/{area}.py: {cls.name} derives from {protocol.__name__} alone"
        imported = {(n.module, n.level, a.name) for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
        assert (f"protocol.{area}", 3, protocol.__name__) in imported, \
            f"{framework}/{area}.py imports {protocol.__name__} from ...protocol.{area}"
        own = set()
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                own.add(node.name)
            elif isinstance(node, ast.Assign):
                own.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                own.add(node.target.id)
        foreign = sorted(n for n in own if not n.startswith("_") and n not in _declared(protocol))
        assert not foreign, f"{framework}/{area}.py: {foreign} are not declared by {protocol.__name__}"


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_framework_adapter_composes_every_area(framework):
    tree = _tree(framework, "__init__.py")
    adapters = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "FrameworkAdapter"]
    assert len(adapters) == 1, f"{framework}/__init__.py defines FrameworkAdapter"
    bases = [b.id for b in adapters[0].bases if isinstance(b, ast.Name)]
    areas = [a for a in AREAS if a not in ABSENT.get(framework, {})]
    want = [_public_classes(_tree(framework, f"{area}.py"))[0].name for area in areas]
    assert bases == want, f"{framework}: FrameworkAdapter{tuple(bases)} composes {want}, in the protocol's order"
    imported = {(n.module, n.level, a.name) for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert all((area, 1, name) in imported for area, name in zip(areas, want)), imported
    assert not [n for n in adapters[0].body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))], \
        f"{framework}: FrameworkAdapter only composes; each method lives in its area's file"


def test_the_protocol_declares_the_areas_the_folders_hold():
    """The folders follow ``protocol.AREAS``: every protocol method is declared by exactly one area."""
    seen: dict[str, str] = {}
    for area, protocol in AREAS.items():
        for name in _declared(protocol):
            assert name not in seen, f"{name} is declared by both {seen[name]} and {area}"
            seen[name] = area


def test_the_shims_old_import_path_is_the_new_module():
    """Users' MXNet modules have ``from layer_conformance.layerside.adapters.mxnet_shim import apply`` (the README's
    path before ``layerside/mxnet_shim.py``): it still gives the one shim, and that folder holds nothing else."""
    from layer_conformance.layerside import mxnet_shim
    from layer_conformance.layerside.adapters import mxnet_shim as old_path
    assert old_path.apply is mxnet_shim.apply and old_path.ALIASES is mxnet_shim.ALIASES
    assert {p.name for p in (LAYERSIDE / "adapters").glob("*.py")} == {"__init__.py", "mxnet_shim.py"}
