# Public entry: an ALB with an ACM certificate for var.domain_name. Only the webhook routes and signed
# media links are forwarded (the admin API, sandboxes and internal services are not reachable from
# outside); anything else answers 404.

resource "aws_acm_certificate" "this" {
  domain_name       = var.domain_name
  validation_method = "DNS"
  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_route53_record" "validation" {
  for_each = var.route53_zone_id == null ? {} : {
    for option in aws_acm_certificate.this.domain_validation_options : option.domain_name => option
  }
  zone_id = var.route53_zone_id
  name    = each.value.resource_record_name
  type    = each.value.resource_record_type
  records = [each.value.resource_record_value]
  ttl     = 300
}

resource "aws_acm_certificate_validation" "this" {
  count                   = var.route53_zone_id == null ? 0 : 1
  certificate_arn         = aws_acm_certificate.this.arn
  validation_record_fqdns = [for record in aws_route53_record.validation : record.fqdn]
}

resource "aws_route53_record" "alias" {
  count   = var.route53_zone_id == null ? 0 : 1
  zone_id = var.route53_zone_id
  name    = var.domain_name
  type    = "A"
  alias {
    name                   = aws_lb.this.dns_name
    zone_id                = aws_lb.this.zone_id
    evaluate_target_health = true
  }
}

resource "aws_s3_bucket" "alb_logs" {
  # checkov:skip=CKV_AWS_18:this is the access-log bucket itself
  # checkov:skip=CKV_AWS_145:ALB access logs can only be written to SSE-S3 buckets (AWS ELB docs)
  # checkov:skip=CKV_AWS_144:logs are not replicated across regions; lifecycle expires them
  # checkov:skip=CKV2_AWS_62:nothing consumes events of the log bucket
  bucket_prefix = "${var.name}-alb-logs-"
}

resource "aws_s3_bucket_versioning" "alb_logs" {
  bucket = aws_s3_bucket.alb_logs.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "alb_logs" {
  bucket = aws_s3_bucket.alb_logs.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "alb_logs" {
  bucket = aws_s3_bucket.alb_logs.id
  rule {
    id     = "expire"
    status = "Enabled"
    filter {}
    expiration {
      days = var.log_retention_days
    }
    noncurrent_version_expiration {
      noncurrent_days = 7
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

resource "aws_s3_bucket_public_access_block" "alb_logs" {
  bucket                  = aws_s3_bucket.alb_logs.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

data "aws_elb_service_account" "this" {}

data "aws_iam_policy_document" "alb_logs" {
  statement {
    actions   = ["s3:PutObject"]
    resources = ["${aws_s3_bucket.alb_logs.arn}/*"]
    principals {
      type        = "AWS"
      identifiers = [data.aws_elb_service_account.this.arn]
    }
  }
}

resource "aws_s3_bucket_policy" "alb_logs" {
  bucket = aws_s3_bucket.alb_logs.id
  policy = data.aws_iam_policy_document.alb_logs.json
}

resource "aws_lb" "this" {
  # checkov:skip=CKV2_AWS_28:WAF is optional (Meta and Google sign every request; bodies are size-limited); attach a web ACL with aws_wafv2_web_acl_association if required
  name                       = var.name
  load_balancer_type         = "application"
  internal                   = false
  subnets                    = aws_subnet.public[*].id
  security_groups            = [aws_security_group.alb.id]
  drop_invalid_header_fields = true
  enable_deletion_protection = true
  # the client's address is appended to X-Forwarded-For; the services trust that header from the
  # public subnets only (FORWARDED_ALLOW_IPS in ecs.tf), so login limits count each browser apart
  xff_header_processing_mode = "append"

  access_logs {
    bucket  = aws_s3_bucket.alb_logs.id
    enabled = true
  }
}

resource "aws_lb_listener" "http" {
  load_balancer_arn = aws_lb.this.arn
  port              = 80
  protocol          = "HTTP"
  default_action {
    type = "redirect"
    redirect {
      port        = "443"
      protocol    = "HTTPS"
      status_code = "HTTP_301"
    }
  }
}

resource "aws_lb_listener" "https" {
  load_balancer_arn = aws_lb.this.arn
  port              = 443
  protocol          = "HTTPS"
  ssl_policy        = "ELBSecurityPolicy-TLS13-1-2-2021-06"
  certificate_arn   = var.route53_zone_id == null ? aws_acm_certificate.this.arn : aws_acm_certificate_validation.this[0].certificate_arn
  default_action {
    type = "fixed-response"
    fixed_response {
      content_type = "text/plain"
      message_body = "not found"
      status_code  = "404"
    }
  }
}

# Public routes: service -> path patterns (the same as infra/Caddyfile). The public API (/api/*) goes
# to the console service, which serves it; an ALB has no body-size limit, so there the services' own
# limits (MAX_BODY_BYTES, KB_MAX_UPLOAD_BYTES, counted while a body arrives) are the only ones.
locals {
  public_routes = {
    whatsapp  = ["/webhooks/whatsapp", "/webhooks/whatsapp/*"]
    instagram = ["/webhooks/instagram", "/webhooks/instagram/*", "/media/*"]
    gmail     = ["/webhooks/gmail", "/webhooks/gmail/*"]
    console   = ["/api/*"]
    web       = ["/web/*"]
  }
}

resource "aws_lb_target_group" "public" {
  # checkov:skip=CKV_AWS_378:TLS ends at the ALB; ALB to task is HTTP inside the VPC's private subnets
  for_each    = local.public_routes
  name        = "${var.name}-${replace(each.key, "_", "-")}"
  port        = local.http_services[each.key].port
  protocol    = "HTTP"
  target_type = "ip"
  vpc_id      = aws_vpc.this.id

  health_check {
    path                = "/healthz"
    matcher             = "200"
    interval            = 15
    healthy_threshold   = 2
    unhealthy_threshold = 3
  }
}

resource "aws_lb_listener_rule" "public" {
  for_each     = local.public_routes
  listener_arn = aws_lb_listener.https.arn
  priority     = 100 + index(keys(local.public_routes), each.key)

  action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.public[each.key].arn
  }
  condition {
    path_pattern {
      values = each.value
    }
  }
}
