# One Switchboard service on ECS Fargate: task definition, service, its own scaling, and (HTTP
# services) a Cloud Map name the other services call it by.

locals {
  full_name = "${var.project}-${var.name}"
  port_mappings = var.port == null ? [] : [{
    containerPort = var.port
    protocol      = "tcp"
  }]
}

resource "aws_ecs_task_definition" "this" {
  family                   = local.full_name
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.cpu
  memory                   = var.memory
  execution_role_arn       = var.execution_role_arn
  task_role_arn            = var.task_role_arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "X86_64"
  }

  container_definitions = jsonencode([{
    name                   = var.name
    image                  = var.image
    command                = var.command
    essential              = true
    readonlyRootFilesystem = false
    user                   = "10001:10001"
    portMappings           = local.port_mappings
    environment            = [for key in sort(keys(var.environment)) : { name = key, value = var.environment[key] }]
    secrets                = [for key in sort(keys(var.secrets)) : { name = key, valueFrom = var.secrets[key] }]
    healthCheck = {
      command     = concat(["CMD"], var.health_check_command)
      interval    = 30
      timeout     = 5
      retries     = 3
      startPeriod = 30
    }
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        awslogs-group         = var.log_group_name
        awslogs-region        = var.region
        awslogs-stream-prefix = var.name
      }
    }
  }])
}

resource "aws_service_discovery_service" "this" {
  # a plan-time boolean: the namespace id is unknown until the first apply, so it cannot decide count
  count = var.discoverable ? 1 : 0
  name  = var.name

  dns_config {
    namespace_id   = var.service_discovery_namespace_id
    routing_policy = "MULTIVALUE"
    dns_records {
      type = "A"
      ttl  = 10
    }
  }

  health_check_custom_config {
    failure_threshold = 1
  }
}

resource "aws_ecs_service" "this" {
  name                               = local.full_name
  cluster                            = var.cluster_arn
  task_definition                    = aws_ecs_task_definition.this.arn
  desired_count                      = var.min_count
  launch_type                        = "FARGATE"
  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200
  enable_execute_command             = false
  propagate_tags                     = "SERVICE"
  health_check_grace_period_seconds  = length(var.target_group_arns) > 0 ? 60 : null

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = var.subnet_ids
    security_groups  = var.security_group_ids
    assign_public_ip = false
  }

  dynamic "load_balancer" {
    for_each = var.target_group_arns
    content {
      target_group_arn = load_balancer.value
      container_name   = var.name
      container_port   = var.port
    }
  }

  dynamic "service_registries" {
    for_each = aws_service_discovery_service.this
    content {
      registry_arn = service_registries.value.arn
    }
  }

  lifecycle {
    ignore_changes = [desired_count] # the autoscaling policy owns it
  }
}

resource "aws_appautoscaling_target" "this" {
  service_namespace  = "ecs"
  resource_id        = "service/${var.cluster_name}/${aws_ecs_service.this.name}"
  scalable_dimension = "ecs:service:DesiredCount"
  min_capacity       = var.min_count
  max_capacity       = var.max_count
}

resource "aws_appautoscaling_policy" "cpu" {
  count              = var.scaling.kind == "cpu" ? 1 : 0
  name               = "${local.full_name}-cpu"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.this.service_namespace
  resource_id        = aws_appautoscaling_target.this.resource_id
  scalable_dimension = aws_appautoscaling_target.this.scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value       = var.scaling.cpu_target
    scale_in_cooldown  = 120
    scale_out_cooldown = 60
    predefined_metric_specification {
      predefined_metric_type = "ECSServiceAverageCPUUtilization"
    }
  }
}

# Workers: jobs waiting per running task (the AWS "backlog per instance" pattern). QueueDepth is the
# queue's ready-job count, published every minute by the queue_metrics service (`switchboard queue
# depth --emf`: CloudWatch embedded metric format through the awslogs driver, no AWS SDK in the image);
# RunningTaskCount comes from Container Insights (enabled on the cluster). queue_target is "jobs
# waiting per worker task".
resource "aws_appautoscaling_policy" "queue" {
  count              = var.scaling.kind == "queue" ? 1 : 0
  name               = "${local.full_name}-queue-depth"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.this.service_namespace
  resource_id        = aws_appautoscaling_target.this.resource_id
  scalable_dimension = aws_appautoscaling_target.this.scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value       = var.scaling.queue_target
    scale_in_cooldown  = 300
    scale_out_cooldown = 60
    customized_metric_specification {
      metrics {
        id          = "depth"
        label       = "jobs ready in ${coalesce(var.scaling.queue_name, "?")}"
        return_data = false
        metric_stat {
          stat = "Maximum"
          metric {
            metric_name = "QueueDepth"
            namespace   = var.scaling.metric_namespace
            dimensions {
              name  = "Queue"
              value = coalesce(var.scaling.queue_name, "?")
            }
          }
        }
      }
      metrics {
        id          = "tasks"
        label       = "running tasks"
        return_data = false
        metric_stat {
          stat = "Average"
          metric {
            metric_name = "RunningTaskCount"
            namespace   = "ECS/ContainerInsights"
            dimensions {
              name  = "ClusterName"
              value = var.cluster_name
            }
            dimensions {
              name  = "ServiceName"
              value = aws_ecs_service.this.name
            }
          }
        }
      }
      metrics {
        id          = "per_task"
        label       = "jobs ready per running task"
        expression  = "IF(tasks > 0, depth / tasks, depth)"
        return_data = true
      }
    }
  }
}
