"""Put the project that /opt/agentgym/project.json pins at /testbed: its PyPI source distribution, downloaded and
checked against its SHA-256, unpacked without its top folder, owned by the agent, and importable from anywhere
through a .pth file (its ``src`` folder, where the project keeps its code there)."""

import hashlib
import io
import json
import shutil
import site
import sys
import tarfile
import urllib.request
from pathlib import Path

TESTBED = Path("/testbed")
project = json.loads(Path("/opt/agentgym/project.json").read_text())
with urllib.request.urlopen(project["url"], timeout=120) as answer:
    data = answer.read()
digest = hashlib.sha256(data).hexdigest()
if digest != project["sha256"]:
    sys.exit(f"{project['url']}: SHA-256 {digest}, pinned {project['sha256']}")
with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
    archive.extractall("/tmp/sdist")  # the archive is the pinned one: its hash was checked
(top,) = Path("/tmp/sdist").iterdir()
shutil.move(str(top), TESTBED)
shutil.rmtree("/tmp/sdist")
for path in [TESTBED, *TESTBED.rglob("*")]:
    shutil.chown(path, "agent", "agent")
(Path(site.getsitepackages()[0]) / "testbed.pth").write_text(f"{TESTBED / project.get('src', '.')}\n")
