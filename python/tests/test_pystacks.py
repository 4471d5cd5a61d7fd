"""The faulthandler file the node daemon reads for Python stacks: registered
only in a directory that is this user's own and private, created 0600
without following a symlink (docs/security.md)."""

import os
import stat
import subprocess
import sys
import textwrap

import pytest

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def install_in(directory):
    """Runs pystacks.install() in a fresh interpreter; (returned, files)."""
    code = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, %r)
        from xputimer import pystacks
        print(pystacks.install())
    """ % SRC)
    env = dict(os.environ, XPU_PYSTACK_DIR=directory, XPU_PYSTACKS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                         check=True).stdout.decode().strip()
    return out == "True"


def test_private_directory_is_created_and_used(tmp_path):
    d = tmp_path / "ps"
    assert install_in(str(d))
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    # The file is removed at exit; its mode is checked while a process holds it
    # in test_file_is_private below.


def test_file_is_private(tmp_path):
    d = tmp_path / "ps"
    code = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, %r)
        from xputimer import pystacks
        assert pystacks.install()
        path = os.path.join(os.environ["XPU_PYSTACK_DIR"], "xpu-pystack-%%d.txt" %% os.getpid())
        st = os.lstat(path)
        print(oct(st.st_mode & 0o777), open(path).readline().split()[:3])
    """ % SRC)
    env = dict(os.environ, XPU_PYSTACK_DIR=str(d), XPU_PYSTACKS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                         check=True).stdout.decode()
    assert out.startswith("0o600 ['xputimer-pystacks', 'pid',"), out


def test_directory_others_may_write_is_refused(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    assert not install_in(str(d))
    assert os.listdir(d) == []


def test_symlinked_directory_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert not install_in(str(link))
    assert os.listdir(real) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create a directory of another user")
def test_directory_of_another_user_is_refused(tmp_path):
    d = tmp_path / "theirs"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)
    assert not install_in(str(d))
