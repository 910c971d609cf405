"""The student distribution's files come from the checkout around this folder (..): the `files`
of pyproject.toml's [tool.hatch.build.hooks.custom], each at the same path. An sdist carries them
at its root, so a wheel built from the sdist takes them from there.

An editable install copies none of them: dev-mode-dirs puts the checkout itself on sys.path, and a
copy in site-packages would shadow the checkout's `grader` package (hatchling copies a static
force-include into an editable wheel, hence this hook)."""

from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class ClientFiles(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        if version == "editable":
            return
        here = Path(self.root)
        source = here if (here / "grader").is_dir() else here.parent  # an unpacked sdist, or the checkout
        for name in self.config["files"]:
            build_data["force_include"][str(source / name)] = name
