{{/* The memory limit the VolumeManagerMemoryNearLimit alert compares with, in bytes:
     prometheusRule.alerts.memoryNearLimit.limitBytes when set, else the container's
     resources.limits.memory read as a Kubernetes quantity (Ki, Mi, Gi, Ti, k, M, G, T or none);
     "" when neither is set (no limit: no alert). */}}
{{- define "volumemanager.alertMemoryLimitBytes" -}}
{{- $set := .Values.prometheusRule.alerts.memoryNearLimit.limitBytes -}}
{{- $q := "" -}}
{{- if $set -}}
{{- $q = toString $set -}}
{{- else if and .Values.resources .Values.resources.limits .Values.resources.limits.memory -}}
{{- $q = toString .Values.resources.limits.memory -}}
{{- end -}}
{{- if $q -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$" $q) -}}
{{- fail (printf "prometheusRule.alerts.memoryNearLimit: the memory limit %q is not a quantity of the form 256Mi, 1Gi or 268435456; set prometheusRule.alerts.memoryNearLimit.limitBytes" $q) -}}
{{- end -}}
{{- $units := dict "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- $unit := trimPrefix $number $q -}}
{{- mulf (float64 $number) (get $units $unit | default 1.0) | int64 -}}
{{- end -}}
{{- end -}}
