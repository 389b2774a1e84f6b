# Used by tests/utils/sanity.sh only when ansible-test cannot download its
# get-pip bootstrap (machines without general internet access). It gives
# ansible-test the same effect from the standard library: bootstrap pip with
# ensurepip, then install what ansible-test asked for. ensurepip runs as a
# subprocess because in-process it would reset pip's configuration file.
import subprocess
import sys

requested = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"])
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install"] + requested))
