"""Writes the generated pages at every build of the site (mkdocs-gen-files): the reference
pages from the code, the home page from the README and the changelog from CHANGELOG.md."""

import re
from pathlib import Path

import mkdocs_gen_files

from opencode_memoryd.cli.reference import PAGES

ROOT = Path(__file__).parents[1]

for name, render in PAGES.items():
    with mkdocs_gen_files.open(f"reference/{name}", "w") as page:
        page.write(render())

# The README's links point into docs/ (as GitHub shows them); the site's root is docs/.
home = (ROOT / "README.md").read_text(encoding="utf-8")
home = re.sub(r"\[([^\]]+)\]\((LICENSE|docs/)\)", r"\1", home)
home = home.replace("](docs/", "](").replace("](CHANGELOG.md)", "](changelog.md)")
with mkdocs_gen_files.open("index.md", "w") as page:
    page.write(home)
with mkdocs_gen_files.open("changelog.md", "w") as page:
    page.write((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))
