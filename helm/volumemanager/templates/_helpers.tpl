{{/* Names and labels shared by the templates. */}}

{{- define "volumemanager.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "volumemanager.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "volumemanager.selectorLabels" -}}
app.kubernetes.io/name: {{ include "volumemanager.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "volumemanager.labels" -}}
{{ include "volumemanager.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "volumemanager.serviceAccountName" -}}
{{- if .Values.rbac.create -}}
{{- default (include "volumemanager.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "volumemanager.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Whether the container mounts tmpfs itself: self ownership with tmpfs on. */}}
{{- define "volumemanager.mountsTmpfs" -}}
{{- if and (eq .Values.volumeOwnership "self") .Values.selfOwnership.tmpfs -}}true{{- end -}}
{{- end -}}

{{/* Whether the metrics Service is rendered (asked for, or needed by the ServiceMonitor). */}}
{{- define "volumemanager.metricsService" -}}
{{- if or .Values.metrics.service.enabled .Values.metrics.serviceMonitor.enabled -}}true{{- end -}}
{{- end -}}
