#!/bin/sh
# Prints the tenant namespace manifest of one occ Namespace:
#
#   deploy/kubernetes/tenant/render.sh <occ-namespace-id> | kubectl apply -f -
#
# The namespace is named occ-<first 15 hex characters of sha256(id)>, as occ expects.
#
# With a second argument, an existing namespace you own is adopted instead: it keeps its name
# and gets the annotation openclaw.dev/namespace-lifecycle=external (and no managed-by label
# or Pod Security label), so occ uses it but never treats it as its own.
#
#   deploy/kubernetes/tenant/render.sh <occ-namespace-id> <existing-namespace>
set -eu

usage() {
  echo "usage: $0 <occ-namespace-id> [existing-namespace]" >&2
  exit 2
}

[ $# -ge 1 ] && [ $# -le 2 ] || usage
id=$1
# occ ids: a lowercase prefix, '_', then a UUID (e.g. ns_5f0c6a9e-1b2d-4c3e-8f4a-0b1c2d3e4f50).
case $id in
  ns_*) ;;
  *) echo "$0: $id is not an occ Namespace id (ns_…)" >&2; exit 2 ;;
esac
case $id in
  *[!a-z0-9_-]*) echo "$0: $id is not an occ Namespace id (ns_…)" >&2; exit 2 ;;
esac

template="$(dirname "$0")/namespace.template.yaml"
hash=$(printf '%s' "$id" | sha256sum | cut -c1-15)

# The template without its header comment (which names the placeholders).
body() {
  echo "# occ tenant namespace of occ Namespace $id (rendered by deploy/kubernetes/tenant/render.sh)"
  awk 'started || !/^#/ { started = 1; print }' "$template"
}

if [ $# -eq 2 ]; then
  name=$2
  case $name in
    ''|*[!a-z0-9-]*|-*|*-) echo "$0: $name is not a namespace name" >&2; exit 2 ;;
  esac
  # Drop the managed-by and Pod Security labels from the Namespace (the first document only;
  # the RBAC objects keep theirs) and mark it as adopted.
  body | sed -e "s/__TENANT_NAMESPACE__/$name/g" -e "s/__OCC_NAMESPACE_ID__/$id/g" | awk '
    /^---/ { doc++ }
    doc == 0 && /^    app\.kubernetes\.io\/managed-by: occ$/ { next }
    doc == 0 && /^    pod-security\.kubernetes\.io\/enforce:/ { next }
    { print }
    doc == 0 && /^    openclaw\.dev\/namespace-id:/ { print "    openclaw.dev/namespace-lifecycle: external" }
  '
else
  body | sed -e "s/__TENANT_NAMESPACE__/occ-$hash/g" -e "s/__OCC_NAMESPACE_ID__/$id/g"
fi
