# One ECS Fargate service per Switchboard service (libs/switchboard/runtime/services.py), each with its
# own scaling: CPU for the web services, queue depth for each worker queue. Internal calls go through
# Cloud Map names (<service>.<name>.internal).

resource "aws_ecs_cluster" "this" {
  name = var.name
  setting {
    name  = "containerInsights"
    value = "enabled" # RunningTaskCount for the queue-depth scaling of the workers
  }
}

resource "aws_service_discovery_private_dns_namespace" "this" {
  name = "${var.name}.internal"
  vpc  = aws_vpc.this.id
}

resource "aws_cloudwatch_log_group" "service" {
  for_each          = toset(concat(keys(local.http_services), keys(local.workers), ["migrate", "queue_metrics"]))
  name              = "/${var.name}/${each.key}"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.this.arn
}

resource "aws_cloudwatch_log_group" "flow" {
  name              = "/${var.name}/vpc-flow"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.this.arn
}

locals {
  internal = aws_service_discovery_private_dns_namespace.this.name

  # name -> port and argv: the same commands as infra/docker-compose.yml (tests/test_infra.py checks both)
  http_services = {
    orchestrator = { port = 8100, command = ["uvicorn", "services.orchestrator.main:create_app", "--factory", "--host", "0.0.0.0", "--port", "8100"] }
    whatsapp     = { port = 8101, command = ["uvicorn", "services.whatsapp.main:create_app", "--factory", "--host", "0.0.0.0", "--port", "8101"] }
    instagram    = { port = 8102, command = ["uvicorn", "services.instagram.main:create_app", "--factory", "--host", "0.0.0.0", "--port", "8102"] }
    gmail        = { port = 8103, command = ["uvicorn", "services.gmail.main:create_app", "--factory", "--host", "0.0.0.0", "--port", "8103"] }
    mcp_tools    = { port = 8104, command = ["uvicorn", "services.mcp_tools.main:create_app", "--factory", "--host", "0.0.0.0", "--port", "8104"] }
    model_server = { port = 8105, command = ["uvicorn", "services.model_server.main:create_app", "--factory", "--host", "0.0.0.0", "--port", "8105"] }
    web          = { port = 8109, command = ["uvicorn", "services.web.main:create_app", "--factory", "--host", "0.0.0.0", "--port", "8109"] }
    # the console runs inside the VPC; the ALB publishes only its public API (/api/*, alb.tf); publishing
    # its pages (an ALB rule on a console host name) is the operator's choice
    console = { port = 8108, command = ["uvicorn", "services.console.main:create_app", "--factory", "--host", "0.0.0.0", "--port", "8108"] }
  }
  workers = {
    worker            = { queue = "arq:queue", command = ["python", "-m", "services.worker.main"] }
    worker_background = { queue = "arq:queue:background", command = ["python", "-m", "services.worker_background.main"] }
  }

  environment = merge({
    HOST                      = "0.0.0.0"
    LOG_FORMAT                = "json"
    GENERATE_SECRETS          = "false"
    ORCHESTRATOR_URL          = "http://orchestrator.${local.internal}:8100"
    MCP_TOOLS_URL             = "http://mcp_tools.${local.internal}:8104/mcp"
    MODEL_SERVER_URL          = "http://model_server.${local.internal}:8105"
    WHATSAPP_URL              = "http://whatsapp.${local.internal}:8101"
    INSTAGRAM_URL             = "http://instagram.${local.internal}:8102"
    WHATSAPP_SANDBOX_ENABLED  = "false"
    INSTAGRAM_SANDBOX_ENABLED = "false"
    GMAIL_SANDBOX_ENABLED     = "false"
    WHATSAPP_GRAPH_BASE_URL   = "https://graph.facebook.com"
    INSTAGRAM_GRAPH_BASE_URL  = "https://graph.instagram.com"
    GMAIL_API_BASE_URL        = "https://gmail.googleapis.com"
    MEDIA_STORE_URL           = "s3://${aws_s3_bucket.media.id}/media"
    MEDIA_STORE_OPTIONS       = jsonencode({ region = var.region })
    MEDIA_PUBLIC_BASE_URL     = "https://${var.domain_name}"
    # X-Forwarded-For is believed only from the load balancer (it runs in the public subnets): login
    # limits count each browser's address, not the ALB's; a client's own header is ignored elsewhere
    FORWARDED_ALLOW_IPS = join(",", aws_subnet.public[*].cidr_block)
  }, var.environment)

  common = {
    project            = var.name
    cluster_arn        = aws_ecs_cluster.this.arn
    cluster_name       = aws_ecs_cluster.this.name
    image              = var.image
    subnet_ids         = aws_subnet.private[*].id
    security_group_ids = [aws_security_group.tasks.id]
    execution_role_arn = aws_iam_role.execution.arn
    task_role_arn      = aws_iam_role.task.arn
    region             = var.region
  }
}

module "http_service" {
  source   = "./modules/ecs_service"
  for_each = local.http_services

  name                           = each.key
  project                        = local.common.project
  cluster_arn                    = local.common.cluster_arn
  cluster_name                   = local.common.cluster_name
  image                          = local.common.image
  command                        = each.value.command
  port                           = each.value.port
  cpu                            = var.services[each.key].cpu
  memory                         = var.services[each.key].memory
  min_count                      = var.services[each.key].min
  max_count                      = var.services[each.key].max
  environment                    = local.environment
  secrets                        = local.secret_arns
  subnet_ids                     = local.common.subnet_ids
  security_group_ids             = local.common.security_group_ids
  execution_role_arn             = local.common.execution_role_arn
  task_role_arn                  = local.common.task_role_arn
  log_group_name                 = aws_cloudwatch_log_group.service[each.key].name
  region                         = local.common.region
  health_check_command           = ["python", "-m", "switchboard.probe", "http://127.0.0.1:${each.value.port}/healthz"]
  target_group_arns              = contains(keys(local.public_routes), each.key) ? [aws_lb_target_group.public[each.key].arn] : []
  service_discovery_namespace_id = aws_service_discovery_private_dns_namespace.this.id
  discoverable                   = true
  scaling                        = { kind = "cpu", cpu_target = var.services[each.key].cpu_target }

  depends_on = [aws_lb_listener_rule.public]
}

module "worker_service" {
  source   = "./modules/ecs_service"
  for_each = local.workers

  name                 = each.key
  project              = local.common.project
  cluster_arn          = local.common.cluster_arn
  cluster_name         = local.common.cluster_name
  image                = local.common.image
  command              = each.value.command
  cpu                  = var.services[each.key].cpu
  memory               = var.services[each.key].memory
  min_count            = var.services[each.key].min
  max_count            = var.services[each.key].max
  environment          = local.environment
  secrets              = local.secret_arns
  subnet_ids           = local.common.subnet_ids
  security_group_ids   = local.common.security_group_ids
  execution_role_arn   = local.common.execution_role_arn
  task_role_arn        = local.common.task_role_arn
  log_group_name       = aws_cloudwatch_log_group.service[each.key].name
  region               = local.common.region
  health_check_command = concat(slice(each.value.command, 0, 3), ["--check"])
  scaling              = { kind = "queue", queue_name = each.value.queue, queue_target = var.services[each.key].queue_target }
}

# Publishes QueueDepth{Queue=...} for every worker queue once a minute as CloudWatch embedded-metric log
# lines (awslogs driver -> CloudWatch Logs -> metrics; no AWS SDK, no extra IAM). One task is enough.
module "queue_metrics" {
  source = "./modules/ecs_service"

  name                 = "queue_metrics"
  project              = local.common.project
  cluster_arn          = local.common.cluster_arn
  cluster_name         = local.common.cluster_name
  image                = local.common.image
  command              = ["switchboard", "queue", "depth", "--emf", "--every", "60"]
  cpu                  = 256
  memory               = 512
  min_count            = 1
  max_count            = 1
  environment          = local.environment
  secrets              = { REDIS_URL = local.secret_arns["REDIS_URL"] }
  subnet_ids           = local.common.subnet_ids
  security_group_ids   = local.common.security_group_ids
  execution_role_arn   = local.common.execution_role_arn
  task_role_arn        = local.common.task_role_arn
  log_group_name       = aws_cloudwatch_log_group.service["queue_metrics"].name
  region               = local.common.region
  health_check_command = ["switchboard", "queue", "depth"]
  scaling              = { kind = "fixed" }
}

# The migration: a task definition run once before each deploy (infra/terraform/deploy.sh runs it,
# waits for exit code 0, then rolls the services onto the new image).
resource "aws_ecs_task_definition" "migrate" {
  family                   = "${var.name}-migrate"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = 512
  memory                   = 1024
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = aws_iam_role.task.arn

  container_definitions = jsonencode([{
    name        = "migrate"
    image       = var.image
    command     = ["switchboard", "db", "upgrade"]
    essential   = true
    user        = "10001:10001"
    environment = [for key in sort(keys(local.environment)) : { name = key, value = local.environment[key] }]
    secrets     = [{ name = "DATABASE_URL", valueFrom = local.secret_arns["DATABASE_URL"] }]
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        awslogs-group         = aws_cloudwatch_log_group.service["migrate"].name
        awslogs-region        = var.region
        awslogs-stream-prefix = "migrate"
      }
    }
  }])
}

resource "aws_ecr_repository" "this" {
  name                 = var.name
  image_tag_mutability = "IMMUTABLE"
  image_scanning_configuration {
    scan_on_push = true
  }
  encryption_configuration {
    encryption_type = "KMS"
    kms_key         = aws_kms_key.this.arn
  }
}
