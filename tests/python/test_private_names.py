"""The Python package's private names stay private: no module of cairn reaches
into another's underscore names (shared helpers live in private modules
whose functions are public within the package, e.g. cairn/_leaves.py), and
help() of the public modules shows no private name."""

import ast
import os
import pydoc
import re

import cairn
import cairn.dist
import cairn.emergency
import cairn.kvstore
import cairn.orbax

PACKAGE_DIR = os.path.dirname(cairn.__file__)
PUBLIC_MODULES = [cairn, cairn.orbax, cairn.emergency, cairn.dist, cairn.kvstore, cairn.manager,
                  cairn.array, cairn.convert]


def _sources():
    for name in sorted(os.listdir(PACKAGE_DIR)):
        if name.endswith(".py"):
            path = os.path.join(PACKAGE_DIR, name)
            with open(path) as f:
                yield name, ast.parse(f.read(), path)


def _cairn_module_aliases(tree):
    """Names bound to cairn modules in a module: `from cairn import x [as y]`,
    `import cairn.x as y`, and `cairn` itself."""
    aliases = {"cairn"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "cairn":
            aliases.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            aliases.update(a.asname for a in node.names if a.asname and a.name.startswith("cairn."))
    return aliases


def _private(name):
    return name.startswith("_") and not name.startswith("__")


def test_no_module_uses_another_modules_private_names():
    found = []
    for file, tree in _sources():
        aliases = _cairn_module_aliases(tree) - {"_core"}  # the native module's binding surface
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cairn"):
                found += [f"{file}:{node.lineno}: from {node.module} import {a.name}"
                          for a in node.names if _private(a.name) and node.module != "cairn"]
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and _private(node.attr)
                    and not (node.value.id == "cairn" and node.attr == "_core")):
                found.append(f"{file}:{node.lineno}: {node.value.id}.{node.attr}")
    assert found == [], "modules reach into other modules' private names:\n" + "\n".join(found)


def _python_private_names():
    """Every underscore name of cairn's modules and the private modules' names."""
    names = {n[:-3] for n in os.listdir(PACKAGE_DIR) if n.endswith(".py") and _private(n)}
    names.add("_core")
    import sys
    for mod_name, mod in list(sys.modules.items()):
        if mod_name == "cairn" or mod_name.startswith("cairn."):
            names.update(n for n in vars(mod) if _private(n))
    return names


def test_help_shows_no_private_name():
    private = _python_private_names()
    assert {"_leaves", "_orbax_restore", "_core"} <= private  # the check sees what it looks for
    shown = {}
    for module in PUBLIC_MODULES:
        text = pydoc.render_doc(module, renderer=pydoc.plaintext)
        # pydoc lists every file of the package under PACKAGE CONTENTS and
        # the path under FILE: those name files, not what the module offers.
        text = re.sub(r"\nPACKAGE CONTENTS\n(    .*\n)*", "\n", text)
        text = re.sub(r"\nFILE\n    .*", "\n", text)
        words = set(re.findall(r"(?<![\w.])_[A-Za-z]\w*", text)) | set(re.findall(r"cairn\.(_\w+)", text))
        bad = sorted(words & private)
        if bad:
            shown[module.__name__] = bad
    assert shown == {}, f"help() shows private names: {shown}"
