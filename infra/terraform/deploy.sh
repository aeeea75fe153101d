#!/usr/bin/env bash
# Deploy a new image: run the migration as a one-off task, wait for it to exit 0, then roll every
# service onto the new task definitions. Usage (after `terraform apply` created everything once):
#   infra/terraform/deploy.sh 0.1.1        # the tag pushed to the ecr_repository_url output
# Needs: aws CLI v2, terraform, jq; the working directory's Terraform state.
set -euo pipefail
cd "$(dirname "$0")"
tag="${1:?usage: deploy.sh IMAGE_TAG}"
repo="$(terraform output -raw ecr_repository_url)"
cluster="$(terraform output -raw cluster_name)"

# 1. new task definitions (migration and services) on the new image, services not yet rolled
terraform apply -var "image=${repo}:${tag}" -target=aws_ecs_task_definition.migrate

# 2. the migration, once; a failure stops the deploy before any service changes
task="$(eval "$(terraform output -raw migrate_command)" --query 'tasks[0].taskArn' --output text)"
echo "migration task ${task}"
aws ecs wait tasks-stopped --cluster "${cluster}" --tasks "${task}"
code="$(aws ecs describe-tasks --cluster "${cluster}" --tasks "${task}" --query 'tasks[0].containers[0].exitCode' --output text)"
if [ "${code}" != "0" ]; then
  echo "migration failed (exit ${code}): see the /$(terraform output -raw cluster_name)/migrate log group" >&2
  exit 1
fi

# 3. every service onto the new image (rolling, circuit breaker rolls back a failing one)
terraform apply -var "image=${repo}:${tag}"
