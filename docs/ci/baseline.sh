#!/usr/bin/env bash
# The baseline of a resilibench release gate (docs/ci/github-actions.yml runs it; copy it to
# .github/scripts/resilibench-baseline.sh beside the workflow).
#
# The baseline is the JSON report of the newest earlier release that passed its own gate:
#   1. Release tags are the git tags matching $TAG_GLOB (v* by default), GitHub Release or not,
#      read from the remote (`git ls-remote`: a shallow checkout has no tags) and ordered by
#      version (`sort -V`: v1.10.0 after v1.9.0; a pre-release v2.0.0-rc1 after v2.0.0),
#      newest first. On a tag only the tags below it count (v1.2.0, or a re-run of it,
#      compares with v1.1.x, never with itself or a later v2.0.0); on a pull request or a
#      manual run, every tag.
#   2. For each tag, the latest run of this workflow pushed for it that concluded `success`.
#      A release whose gate failed concluded `failure` and is passed over (so is a tag this
#      workflow never ran on), and the next older tag is tried.
#   3. That run's artifact $BASELINE_ARTIFACT (uploaded only when the run's gate passed),
#      downloaded into $BASELINE_DIR.
# It never fails the job: when there is no earlier release, no passing run, the artifact has
# expired (after 90 days by default) or the token may not read it (a pull request from a
# fork), it says why in a ::notice:: and in the job summary,
# and the run gates on --resili-fail-under alone.
#
# Outputs ($GITHUB_OUTPUT): report (the baseline report's path, empty when there is none),
# tag and run-id (the release it comes from). Needs git, gh with GH_TOKEN, and the GITHUB_*
# variables every Actions step gets.
set -uo pipefail

BASELINE_ARTIFACT=${BASELINE_ARTIFACT:-resilibench-baseline}
BASELINE_DIR=${BASELINE_DIR:-baseline}
TAG_GLOB=${TAG_GLOB:-v*}
MAX_TAGS=${MAX_TAGS:-20}          # tags looked at before giving up (one API call each)
repo=$GITHUB_REPOSITORY
# This workflow's file (owner/repo/.github/workflows/FILE.yml@REF): its runs, not another's.
workflow=${GITHUB_WORKFLOW_REF:+$(basename "${GITHUB_WORKFLOW_REF%%@*}")}
workflow=${workflow:-$GITHUB_WORKFLOW}
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT

oneline() { tr -s '\n\r' '  ' <"$errors" | sed 's/ *$//'; }

output() { echo "$1=$2" >>"$GITHUB_OUTPUT"; }

no_baseline() {  # $1: why (one line)
  echo "::notice title=resilibench: no baseline::$1; the gate checks --resili-fail-under only"
  echo "**Baseline**: none: $1; the gate checks \`--resili-fail-under\` only." \
    >>"$GITHUB_STEP_SUMMARY"
  output report ""
  exit 0
}

# $1 sorts strictly before $2 by version.
before() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$1" ]; }

if ! listing=$(git ls-remote --tags --refs origin "refs/tags/$TAG_GLOB" 2>"$errors"); then
  no_baseline "the release tags could not be listed (git ls-remote: $(oneline))"
fi
current=""
if [ "${GITHUB_REF_TYPE:-}" = tag ]; then
  current=$GITHUB_REF_NAME
fi
candidates=()
while read -r tag; do
  [ -n "$tag" ] || continue
  if [ -z "$current" ] || before "$tag" "$current"; then
    candidates+=("$tag")
  fi
done < <(sed 's|.*refs/tags/||' <<<"$listing" | sort -rV)
if [ "${#candidates[@]}" -eq 0 ]; then
  no_baseline "no release tag ($TAG_GLOB) before ${current:-this run}"
fi

tag=""
run_id=""
passed_over=()
for candidate in "${candidates[@]:0:$MAX_TAGS}"; do
  if ! run_id=$(gh run list --repo "$repo" --workflow "$workflow" --branch "$candidate" \
                  --event push --status success --limit 1 \
                  --json databaseId --jq '.[].databaseId' 2>"$errors"); then
    no_baseline "the runs of release $candidate could not be listed (gh: $(oneline)); a pull request from a fork may have no access to them"
  fi
  if [ -n "$run_id" ]; then
    tag=$candidate
    break
  fi
  passed_over+=("$candidate")
done
skipped=""
if [ "${#passed_over[@]}" -gt 0 ]; then
  skipped=" (passed over, no run of this workflow that passed: ${passed_over[*]})"
fi
if [ -z "$tag" ]; then
  no_baseline "no run of this workflow passed its gate on the release tags ${passed_over[*]}"
fi

rm -rf "$BASELINE_DIR"
mkdir -p "$BASELINE_DIR"
if ! gh run download "$run_id" --repo "$repo" --name "$BASELINE_ARTIFACT" \
       --dir "$BASELINE_DIR" >/dev/null 2>"$errors"; then
  no_baseline "the report of release $tag (run $run_id) could not be downloaded (gh: $(oneline)); artifacts expire (after 90 days by default), and the next release makes a new one$skipped"
fi
if [ ! -f "$BASELINE_DIR/report.json" ]; then
  no_baseline "artifact $BASELINE_ARTIFACT of release $tag (run $run_id) holds no report.json"
fi

url="${GITHUB_SERVER_URL:-https://github.com}/$repo/actions/runs/$run_id"
echo "::notice title=resilibench baseline::release $tag (run $run_id)$skipped"
echo "**Baseline**: release $tag, the report of [run $run_id]($url)$skipped." \
  >>"$GITHUB_STEP_SUMMARY"
output report "$BASELINE_DIR/report.json"
output tag "$tag"
output run-id "$run_id"
