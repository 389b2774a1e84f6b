# The two commands: `make doctor` (doctor on the embedded inventory + fleet report) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
INVENTORY ?= inventories/local.yml
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/collections

.PHONY: doctor test unit integration sanity lint molecule newest-core release-check release system-deps docs clean

doctor: $(VENV)/.runtime collections/ansible_collections/continuum/hydra
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/doctor.yml

test: $(VENV)/.test system-deps collections/ansible_collections/continuum/hydra
	tests/utils/release_check.sh
	$(BIN)/python -m pytest -n 2 tests/unit tests/integration
	tests/utils/molecule.sh
	tests/utils/sanity.sh
	$(MAKE) --no-print-directory lint
	tests/utils/newest_core.sh

unit: $(VENV)/.test collections/ansible_collections/continuum/hydra
	$(BIN)/python -m pytest tests/unit

integration: $(VENV)/.test system-deps collections/ansible_collections/continuum/hydra
	$(BIN)/python -m pytest tests/integration

sanity: $(VENV)/.test
	tests/utils/sanity.sh

# The playbook tests again on the newest supported ansible-core (needs Python >= 3.12; skipped with the reason without).
newest-core: system-deps collections/ansible_collections/continuum/hydra
	tests/utils/newest_core.sh

# The roles' Molecule scenarios (roles/<role>/molecule/default, delegated driver): `make molecule ROLES="mig"`.
molecule: $(VENV)/.test collections/ansible_collections/continuum/hydra
	tests/utils/molecule.sh $(ROLES)

# Release readiness (docs/release.md): fragments lint, tarball, ansible-builder create, galaxy-importer.
release-check:
	tests/utils/release_check.sh

# Cut a release: `make release VERSION=0.2.0 SUMMARY="..."` (bumps galaxy.yml, writes CHANGELOG.md).
release:
	tests/utils/release.sh $(VERSION) "$(SUMMARY)"

# The packages mypy checks: annotated public functions throughout (ruff's config is ruff.toml, mypy's mypy.ini).
TYPED := $(addprefix -p ansible_collections.continuum.hydra.plugins.,module_utils._host module_utils._doctor \
	module_utils._remediate module_utils._workload module_utils._profile module_utils._env_setup module_utils._fabric module_utils._status module_utils._results module_utils._expect module_utils._atomic plugin_utils)

lint: $(VENV)/.test collections/ansible_collections/continuum/hydra
	$(BIN)/ruff check .
	$(BIN)/mypy $(TYPED)
	$(BIN)/ansible-lint --profile production --offline

# The GPU side proven on a real GPU machine in under 8 minutes (docs/gpu-check.md); no .venv needed, it makes its own:
# `make gpu-check GPU_CHECK_OUT=DIR GPU_CHECK_ARGS="--pack"`. Without a GPU it says so and exits 0.
.PHONY: gpu-check
gpu-check: collections/ansible_collections/continuum/hydra
	@PYTHONPATH=collections $(PYTHON) benchmarks/gpu_check.py $(if $(GPU_CHECK_OUT),--out "$(GPU_CHECK_OUT)") $(GPU_CHECK_ARGS)

# One benchmark (benchmarks/README.md): `make bench BENCH=fleet_analysis ARGS="--rounds 1"`. They import the collection
# through collections/, as the tests do.
.PHONY: bench
BENCH ?= fleet_stragglers
bench: $(VENV)/.test collections/ansible_collections/continuum/hydra
	PYTHONPATH=collections $(BIN)/python benchmarks/$(BENCH).py $(ARGS)

docs: $(VENV)/.test collections/ansible_collections/continuum/hydra
	PYTHONPATH=collections $(BIN)/python tests/utils/gen_checks_doc.py > docs/checks.md
	$(BIN)/python tests/utils/gen_role_readmes.py

# Debian packages the integration tests use (real daemons, real tools); root or sudo needed once.
system-deps:
	tests/utils/system-deps.sh

$(VENV)/.runtime:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet 'ansible-core>=2.19,<2.20'
	touch $@

$(VENV)/.test: $(VENV)/.runtime tests/requirements.txt
	$(BIN)/python -m pip install --quiet -r tests/requirements.txt
	touch $@

collections/ansible_collections/continuum/hydra:
	mkdir -p collections/ansible_collections/continuum
	ln -sfn ../../.. $@

clean:
	rm -rf $(VENV) .venv-newest-core collections reports tests/output .pytest_cache
