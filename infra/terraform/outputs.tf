output "webhook_urls" {
  description = "Callback URLs for the providers: Meta (WhatsApp, Instagram) webhooks and the Gmail Pub/Sub push endpoint."
  value = {
    whatsapp  = "https://${var.domain_name}/webhooks/whatsapp"
    instagram = "https://${var.domain_name}/webhooks/instagram"
    gmail     = "https://${var.domain_name}/webhooks/gmail"
  }
}

output "alb_dns_name" {
  description = "Point domain_name here (CNAME or alias) when route53_zone_id is null."
  value       = aws_lb.this.dns_name
}

output "acm_validation_records" {
  description = "DNS records that validate the certificate (create them yourself when route53_zone_id is null)."
  value = [for option in aws_acm_certificate.this.domain_validation_options : {
    name  = option.resource_record_name
    type  = option.resource_record_type
    value = option.resource_record_value
  }]
}

output "ecr_repository_url" {
  description = "Push the image of infra/Dockerfile here; set var.image to it with a new tag per release."
  value       = aws_ecr_repository.this.repository_url
}

output "operator_secret_arns" {
  description = "Secrets to fill once with `aws secretsmanager put-secret-value --secret-id <arn> --secret-string ...`."
  value       = { for name, secret in aws_secretsmanager_secret.operator : name => secret.arn }
}

output "meta_verify_token_secret_arn" {
  description = "The generated META_VERIFY_TOKEN (read it with get-secret-value and paste it into Meta's webhook form)."
  value       = aws_secretsmanager_secret.generated["META_VERIFY_TOKEN"].arn
}

output "migrate_command" {
  description = "The one-off migration task (deploy.sh runs it before every deploy)."
  value       = "aws ecs run-task --cluster ${aws_ecs_cluster.this.name} --launch-type FARGATE --task-definition ${aws_ecs_task_definition.migrate.family} --network-configuration 'awsvpcConfiguration={subnets=[${join(",", aws_subnet.private[*].id)}],securityGroups=[${aws_security_group.tasks.id}],assignPublicIp=DISABLED}'"
}

output "cluster_name" {
  description = "ECS cluster."
  value       = aws_ecs_cluster.this.name
}

output "api_url" {
  description = "Base URL of the public API for a business's own systems (tenant API keys); its OpenAPI document is at /api/v1/openapi.json."
  value       = "https://${var.domain_name}/api/v1"
}
