variable "name" {
  description = "Prefix of every resource name (letters, digits and '-')."
  type        = string
  default     = "switchboard"
}

variable "region" {
  description = "AWS region, e.g. eu-west-1."
  type        = string
}

variable "tags" {
  description = "Extra tags on every resource."
  type        = map(string)
  default     = {}
}

variable "domain_name" {
  description = "Public host name of the deployment (support.example.com): the ACM certificate, the webhook URLs Meta and Google call."
  type        = string
}

variable "route53_zone_id" {
  description = "Route 53 hosted zone of domain_name: when set, the certificate is validated and the alias record created here; null: create the validation records and the CNAME to the ALB yourself (outputs acm_validation_records, alb_dns_name)."
  type        = string
  default     = null
}

variable "image" {
  description = "Container image of infra/Dockerfile with an immutable tag, e.g. 123456789012.dkr.ecr.eu-west-1.amazonaws.com/switchboard:0.1.0 (push it to the ecr_repository_url output)."
  type        = string
}

variable "vpc_cidr" {
  description = "CIDR of the new VPC."
  type        = string
  default     = "10.40.0.0/16"
}

variable "az_count" {
  description = "Availability zones used (public + private subnet in each; one NAT gateway per zone)."
  type        = number
  default     = 2
}

variable "db_instance_class" {
  description = "RDS instance class of PostgreSQL."
  type        = string
  default     = "db.t4g.medium"
}

variable "db_engine_version" {
  description = "RDS PostgreSQL version (pgvector >= 0.8 ships with 17.x; migrations run CREATE EXTENSION vector and btree_gin)."
  type        = string
  default     = "17.4"
}

variable "db_allocated_storage_gb" {
  description = "Initial RDS storage in GB (autoscaling up to 4x)."
  type        = number
  default     = 50
}

variable "db_multi_az" {
  description = "Standby replica in a second zone."
  type        = bool
  default     = true
}

variable "db_backup_retention_days" {
  description = "Days of automated RDS backups (point-in-time recovery window)."
  type        = number
  default     = 14
}

variable "redis_node_type" {
  description = "ElastiCache node type (Valkey engine, Redis protocol)."
  type        = string
  default     = "cache.t4g.small"
}

variable "log_retention_days" {
  description = "Days CloudWatch keeps service logs (a year by default: audits of who was answered what)."
  type        = number
  default     = 365
}

variable "services" {
  description = <<-EOT
    Size and scaling of each service: cpu units, memory MiB, min and max tasks, and for workers
    queue_target (ready jobs per task before one more starts); web services scale on cpu_target (%).
    Keys: orchestrator, whatsapp, instagram, gmail, web, mcp_tools, model_server, worker, worker_background.
  EOT
  type = map(object({
    cpu          = number
    memory       = number
    min          = number
    max          = number
    cpu_target   = optional(number, 60)
    queue_target = optional(number, 20)
  }))
  default = {
    orchestrator      = { cpu = 1024, memory = 2048, min = 2, max = 10 }
    whatsapp          = { cpu = 512, memory = 1024, min = 2, max = 6 }
    instagram         = { cpu = 512, memory = 1024, min = 2, max = 6 }
    gmail             = { cpu = 512, memory = 1024, min = 1, max = 4 }
    web               = { cpu = 512, memory = 1024, min = 2, max = 6 }
    mcp_tools         = { cpu = 512, memory = 1024, min = 2, max = 6 }
    model_server      = { cpu = 256, memory = 512, min = 1, max = 2 }
    worker            = { cpu = 1024, memory = 2048, min = 2, max = 20, queue_target = 10 }
    worker_background = { cpu = 1024, memory = 2048, min = 1, max = 6, queue_target = 50 }
  }
}

variable "operator_secrets" {
  description = "Secrets whose values come from the providers; Terraform creates them empty, you set each once with `aws secretsmanager put-secret-value` before the first deploy (a task whose secret has no value does not start). Add OPENAI_API_KEY / ANTHROPIC_API_KEY to use a provider model."
  type        = list(string)
  default     = ["META_APP_SECRET", "INSTAGRAM_APP_SECRET"]
}

variable "environment" {
  description = "Extra plain settings for every service (docs/reference/configuration.md), e.g. { GMAIL_PUBSUB_TOPIC = \"projects/p/topics/t\", GMAIL_PUSH_AUDIENCE = \"https://support.example.com/webhooks/gmail\" }."
  type        = map(string)
  default     = {}
}
