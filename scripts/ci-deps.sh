#!/usr/bin/env bash
# Installs what test/deploy/deploy.test.ts and test/integration/operators/browser.test.ts need beyond node_modules,
# from Debian's packages:
#   promtool        (package prometheus)        checks and unit-tests the alert rules
#   kubectl         (package kubernetes-client) `kubectl kustomize` renders k8s/base and k8s/overlays/dev (skipped when a
#                                               kubectl is already on PATH, as on this image)
#   docker-compose  (package docker-compose)    validates docker-compose.yml (`config -q`)
#   chromium        (package chromium)          headless browser of test/integration/operators/browser.test.ts
#                                               (driven by playwright-core at /usr/bin/chromium)
#   initdb, postgres (package postgresql)       the archive's PostgreSQL, started in a temp dir by the tests, the
#                                               demo and the bench (testkit/embeddedPostgres.ts)
# and checks that the npm devDependencies the test imports are installed.
# test/deploy/image.test.ts (the production image boots) needs nothing more than npm and the npm registry:
# it runs `npm ci --omit=dev` into a temp folder itself.
#
# Idempotent and fast when everything is there (no apt-get at all). Runs as root, or with sudo.
# Called by .ci/run before `npm test`.
set -euo pipefail

cd "$(dirname "$0")/.."

declare -A PACKAGE_OF=(
  [promtool]=prometheus
  [kubectl]=kubernetes-client
  [docker-compose]=docker-compose
  [chromium]=chromium
  [initdb]=postgresql
)
TOOLS=(promtool kubectl docker-compose chromium initdb)

# chromium must be Debian's, at the path the browser test launches.
# initdb: Debian keeps PostgreSQL's server binaries in /usr/lib/postgresql/<version>/bin, off PATH.
present() {
  if [[ $1 == chromium ]]; then [[ -x /usr/bin/chromium ]];
  elif [[ $1 == initdb ]]; then command -v initdb >/dev/null 2>&1 || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null;
  else command -v "$1" >/dev/null 2>&1; fi
}

missing=()
for tool in "${TOOLS[@]}"; do
  present "$tool" || missing+=("${PACKAGE_OF[$tool]}")
done

if ((${#missing[@]} > 0)); then
  SUDO=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { echo "ci-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    SUDO=(sudo)
  fi
  echo "ci-deps: installing ${missing[*]} from Debian"
  # Packages with a service (prometheus) must not start it: use policy-rc.d while installing,
  # unless the machine already has one.
  created_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee /usr/sbin/policy-rc.d >/dev/null
    "${SUDO[@]}" chmod 755 /usr/sbin/policy-rc.d
    created_policy=1
  fi
  cleanup() { if [[ $created_policy -eq 1 ]]; then "${SUDO[@]}" rm -f /usr/sbin/policy-rc.d; fi; }
  trap cleanup EXIT
  "${SUDO[@]}" apt-get update -qq
  for pkg in "${missing[@]}"; do
    if [[ -z "$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}' | grep -v '(none)')" ]]; then
      echo "ci-deps: Debian has no package $pkg on this machine ($(. /etc/os-release && echo "$PRETTY_NAME"))" >&2
      exit 1
    fi
  done
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

for tool in "${TOOLS[@]}"; do
  present "$tool" || { echo "ci-deps: $tool still missing after install" >&2; exit 1; }
done

# npm devDependencies imported by test/deploy/deploy.test.ts and test/integration/operators/browser.test.ts (declared in package.json).
if [[ ! -d node_modules ]]; then
  echo "ci-deps: node_modules missing, running npm ci"
  npm ci --no-audit --no-fund
fi
node --input-type=module -e "
  await import('kubernetes-models/apps/v1');
  await import('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1');
  await import('dockerfile-utils');
  await import('playwright-core');
" || { echo 'ci-deps: npm devDependencies kubernetes-models, @kubernetes-models/prometheus-operator, dockerfile-utils, playwright-core missing: run npm ci' >&2; exit 1; }

echo "ci-deps: ok ($(promtool --version 2>&1 | head -1 | awk '{print $1, $3}'); kubectl $(kubectl version --client 2>/dev/null | awk '/Client Version/ {print $3}'); $(docker-compose version --short 2>/dev/null | sed 's/^/docker-compose /'); $(/usr/bin/chromium --version 2>/dev/null | awk '{print $1, $2}'))"
