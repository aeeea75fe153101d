# Secrets Manager holds every secret (docs/reference/configuration.md); ECS injects them as environment variables at
# task start. Internal ones are generated here; the provider ones (var.operator_secrets) are created
# empty and set once by the operator (docs/going-live.md). GENERATE_SECRETS=false in every task: a
# service whose secret is missing refuses to start and names it.

resource "aws_kms_key" "this" {
  description             = "${var.name}: secrets, logs, RDS, ElastiCache, S3"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.kms.json
}

resource "aws_kms_alias" "this" {
  name          = "alias/${var.name}"
  target_key_id = aws_kms_key.this.key_id
}

resource "random_password" "internal" {
  for_each = toset(["SERVICE_TOKEN", "MCP_SERVICE_TOKEN", "TOOL_CAPABILITY_KEY", "ADMIN_TOKEN", "META_VERIFY_TOKEN", "GMAIL_PUSH_SECRET"])
  length   = 43
  special  = false
}

resource "random_bytes" "encryption_key" {
  length = 32
}

locals {
  # Fernet wants URL-safe base64 of 32 bytes
  encryption_key = replace(replace(random_bytes.encryption_key.base64, "+", "-"), "/", "_")
  generated_secrets = merge(
    { for name, value in random_password.internal : name => value.result },
    {
      ENCRYPTION_KEY = local.encryption_key
      DATABASE_URL   = "postgresql://switchboard:${random_password.db.result}@${aws_db_instance.this.endpoint}/switchboard?ssl=require"
      REDIS_URL      = "rediss://:${random_password.redis.result}@${aws_elasticache_replication_group.this.primary_endpoint_address}:6379/0"
    },
  )
}

resource "aws_secretsmanager_secret" "generated" {
  # checkov:skip=CKV2_AWS_57:rotation is a deploy (new value, restart); ENCRYPTION_KEY rotates with `switchboard keys rotate` (docs/operations.md#backups-and-restore)
  for_each                = toset(keys(local.generated_secrets))
  name                    = "${var.name}/${each.key}"
  kms_key_id              = aws_kms_key.this.arn
  recovery_window_in_days = 7
}

resource "aws_secretsmanager_secret_version" "generated" {
  for_each      = aws_secretsmanager_secret.generated
  secret_id     = each.value.id
  secret_string = local.generated_secrets[each.key]
}

resource "aws_secretsmanager_secret" "operator" {
  # checkov:skip=CKV2_AWS_57:provider secrets (Meta app secrets) are rotated in the provider's console, then here
  for_each                = toset(var.operator_secrets)
  name                    = "${var.name}/${each.key}"
  kms_key_id              = aws_kms_key.this.arn
  recovery_window_in_days = 7
}

locals {
  secret_arns = merge(
    { for name, secret in aws_secretsmanager_secret.generated : name => secret.arn },
    { for name, secret in aws_secretsmanager_secret.operator : name => secret.arn },
  )
}
