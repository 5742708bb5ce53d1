{{/* Names and labels. */}}
{{- define "ttsfarm.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "ttsfarm.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: include "ttsfarm.selector" (list . "worker") */}}
{{- define "ttsfarm.selector" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ $root.Chart.Name }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "ttsfarm.image" -}}
{{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
{{- end -}}

{{/* The Celery name of a worker, before "@<pod name>"; its health check asks for it. */}}
{{- define "ttsfarm.workerName" -}}
ttsfarm-gpu0
{{- end -}}

{{/*
The Redis list that holds a queue's messages of one priority step. kombu's Redis transport keeps
one list per step (0, 3, 6, 9): step 0 is the queue's own name, the others are the name, "\x06\x16"
and the step (kombu.transport.redis.Channel._q_for_pri). Rendered as a JSON string, which YAML
reads with the same escapes. include "ttsfarm.priorityList" (list QUEUE STEP)
*/}}
{{- define "ttsfarm.priorityList" -}}
{{- $queue := index . 0 -}}
{{- $step := int (index . 1) -}}
{{- if eq $step 0 -}}
{{- $queue | toJson -}}
{{- else -}}
{{- printf "%s\x06\x16%d" $queue $step | toJson -}}
{{- end -}}
{{- end -}}

{{/* Where every ttsfarm container's settings come from: the ConfigMap and the S3 keys. */}}
{{- define "ttsfarm.envFrom" -}}
- configMapRef:
    name: {{ include "ttsfarm.fullname" . }}
{{- with .Values.s3.credentialsSecret }}
- secretRef:
    name: {{ . }}
{{- end }}
{{- end -}}

{{/* The broker: Redis's password from its Secret, and the URL Kubernetes fills in with it. */}}
{{- define "ttsfarm.brokerEnv" -}}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.passwordSecret.name }}
      key: {{ .Values.redis.passwordSecret.key }}
# After the password: $(NAME) is filled in from variables defined above it.
- name: TTSFARM_BROKER_URL
  value: {{ printf "%s://:$(REDIS_PASSWORD)@%s:%d/%d" (ternary "rediss" "redis" .Values.redis.tls) .Values.redis.host (int .Values.redis.port) (int .Values.redis.db) | quote }}
{{- end -}}

{{/* A block of TTSFARM_* settings, as ConfigMap data; the chart's own may not be set twice. */}}
{{- define "ttsfarm.settings" -}}
{{- $own := list "TTSFARM_BROKER_URL" "TTSFARM_QUEUE" "TTSFARM_STORAGE_URL" "TTSFARM_S3_ENDPOINT_URL" "TTSFARM_S3_REGION" "TTSFARM_S3_CREATE_BUCKET" "TTSFARM_TEMP_DIR" "TTSFARM_CONSUMERS" "TTSFARM_STOP_GRACE_SECONDS" "TTSFARM_VISIBILITY_TIMEOUT_SECONDS" "TTSFARM_METRICS_PORT" -}}
{{- range $name, $value := . }}
{{- if has $name $own }}
{{- fail (printf "%s is set by the chart from its own values (docs/kubernetes.md); leave it out of settings" $name) }}
{{- end }}
{{- if not (hasPrefix "TTSFARM_" $name) }}
{{- fail (printf "settings takes TTSFARM_* variables only, not %s" $name) }}
{{- end }}
{{ $name }}: {{ $value | toString | quote }}
{{- end }}
{{- end -}}
