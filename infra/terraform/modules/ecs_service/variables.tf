variable "name" {
  description = "Service name (switchboard-<name> in ECS, the log stream prefix, the Cloud Map name)."
  type        = string
}

variable "project" {
  description = "Prefix of every resource name (the root's var.name)."
  type        = string
}

variable "cluster_arn" {
  description = "ECS cluster the service runs in."
  type        = string
}

variable "cluster_name" {
  description = "ECS cluster name (Application Auto Scaling resource id)."
  type        = string
}

variable "image" {
  description = "Container image (ECR URI with an immutable tag)."
  type        = string
}

variable "command" {
  description = "Container command, the same argv as docker-compose.yml's."
  type        = list(string)
}

variable "cpu" {
  description = "Task CPU units (256 = 0.25 vCPU)."
  type        = number
}

variable "memory" {
  description = "Task memory in MiB."
  type        = number
}

variable "port" {
  description = "Container port of an HTTP service; null for a worker."
  type        = number
  default     = null
}

variable "environment" {
  description = "Plain environment variables (no secrets)."
  type        = map(string)
}

variable "secrets" {
  description = "Environment variable name -> Secrets Manager secret ARN (injected by ECS at start)."
  type        = map(string)
}

variable "subnet_ids" {
  description = "Private subnets of the tasks."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups of the tasks."
  type        = list(string)
}

variable "execution_role_arn" {
  description = "Role ECS uses to pull the image, read the secrets and write logs."
  type        = string
}

variable "task_role_arn" {
  description = "Role the application runs as (S3 media bucket, nothing else)."
  type        = string
}

variable "log_group_name" {
  description = "CloudWatch log group of the service."
  type        = string
}

variable "region" {
  description = "AWS region (awslogs driver)."
  type        = string
}

variable "health_check_command" {
  description = "Container health check (CMD argv), e.g. python -m switchboard.probe URL."
  type        = list(string)
}

variable "target_group_arns" {
  description = "ALB target groups this service registers in (public HTTP services only)."
  type        = list(string)
  default     = []
}

variable "service_discovery_namespace_id" {
  description = "Cloud Map private DNS namespace the service registers <name>.<namespace> in (with discoverable)."
  type        = string
  default     = null
}

variable "discoverable" {
  description = "Register in service_discovery_namespace_id (HTTP services other services call)."
  type        = bool
  default     = false
}

variable "min_count" {
  description = "Fewest running tasks."
  type        = number
}

variable "max_count" {
  description = "Most running tasks."
  type        = number
}

variable "scaling" {
  description = <<-EOT
    How the service scales: kind "cpu" (target tracking on average CPU, for web services) with
    cpu_target percent, kind "fixed" (between min_count and max_count, no policy), or kind "queue" (target tracking on the queue-depth metric the queue_metrics
    service publishes, for workers) with queue_name, queue_target jobs per task and metric_namespace.
  EOT
  type = object({
    kind             = string
    cpu_target       = optional(number, 60)
    queue_name       = optional(string)
    queue_target     = optional(number, 20)
    metric_namespace = optional(string, "Switchboard/Queues")
  })
  validation {
    condition     = contains(["cpu", "queue", "fixed"], var.scaling.kind)
    error_message = "scaling.kind must be cpu, queue or fixed."
  }
}

