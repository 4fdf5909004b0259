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

{{/* Whether the daemon uses the kubelet's own credentials (credentials: node). */}}
{{- define "volumemanager.nodeCredentials" -}}
{{- if eq .Values.credentials "node" -}}true{{- end -}}
{{- end -}}

{{/* The value of a flag given in extraArgs as --flag=value or --flag value (the last one wins, as
     on the command line), or "" when it is not there. Call with (list . "--flag"). */}}
{{- define "volumemanager.extraArg" -}}
{{- $root := index . 0 -}}
{{- $flag := index . 1 -}}
{{- $args := $root.Values.extraArgs | default list -}}
{{- $value := "" -}}
{{- range $i, $a := $args -}}
{{- if hasPrefix (printf "%s=" $flag) $a -}}
{{- $value = trimPrefix (printf "%s=" $flag) $a -}}
{{- else if and (eq $a $flag) (lt (add1 $i) (len $args)) -}}
{{- $value = index $args (add1 $i) -}}
{{- end -}}
{{- end -}}
{{- $value -}}
{{- end -}}

{{/* The lock the daemon is given: the value's, unless extraArgs (which come last) change it. */}}
{{/*
The daemon's read policy (credentials: serviceAccount): what the chart's role lets it read, so it
asks for nothing else and treats what is outside as configured policy (a Normal Event per pod, the
volumes left to the kubelet), never as a refusal. One arg per line, for the container's args.
*/}}
{{- define "volumemanager.readPolicyArgs" -}}
{{- if not (include "volumemanager.nodeCredentials" .) -}}
{{- if not .Values.rbac.secrets }}
- --no-secrets
{{- end -}}
{{- with .Values.rbac.namespaces }}
- --object-namespaces={{ join "," . }}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "volumemanager.resourceLock" -}}
{{- default .Values.leaderElection.resourceLock (include "volumemanager.extraArg" (list . "--leader-elect-resource-lock")) -}}
{{- end -}}

{{/* Whether the API server has DaemonSet surge (rollingUpdate.maxSurge): the DaemonSetUpdateSurge
     feature, beta and on by default from Kubernetes 1.22 (GA 1.25). 1.21 has it alpha, off by
     default; 1.20 has no such field, drops it as unknown and then refuses maxUnavailable: 0. */}}
{{- define "volumemanager.hasDaemonSetSurge" -}}
{{- if semverCompare ">=1.22.0-0" .Capabilities.KubeVersion.Version -}}true{{- end -}}
{{- end -}}

{{/* Whether a maxSurge or maxUnavailable (an int or a percentage) is zero. */}}
{{- define "volumemanager.isZero" -}}
{{- if has (toString .) (list "0" "0%") -}}true{{- end -}}
{{- end -}}

{{/* The DaemonSet's updateStrategy for the server's version, as JSON. With surge (1.22 and later):
     maxSurge 1 and maxUnavailable 0 when neither is set; when only one is, the other 0, or 1 if
     the one set is 0 (the server refuses both 0). Without (before 1.22): maxUnavailable, 1 (the
     server's own default) when unset, and never a maxSurge field. A surge asked for on a server
     without it, and both 0, are refused by volumemanager.validate, which runs first. */}}
{{- define "volumemanager.updateStrategy" -}}
{{- $type := .Values.updateStrategy.type -}}
{{- if ne $type "RollingUpdate" -}}
{{- dict "type" $type | toJson -}}
{{- else -}}
{{- $given := .Values.updateStrategy.rollingUpdate | default dict -}}
{{- $surgeSet := and (hasKey $given "maxSurge") (not (kindIs "invalid" $given.maxSurge)) -}}
{{- $unavailableSet := and (hasKey $given "maxUnavailable") (not (kindIs "invalid" $given.maxUnavailable)) -}}
{{- $rolling := dict -}}
{{- if include "volumemanager.hasDaemonSetSurge" . -}}
{{- if and $surgeSet $unavailableSet -}}
{{- $rolling = dict "maxSurge" $given.maxSurge "maxUnavailable" $given.maxUnavailable -}}
{{- else if $surgeSet -}}
{{- $rolling = dict "maxSurge" $given.maxSurge "maxUnavailable" (ternary 1 0 (eq (include "volumemanager.isZero" $given.maxSurge) "true")) -}}
{{- else if $unavailableSet -}}
{{- $rolling = dict "maxSurge" (ternary 1 0 (eq (include "volumemanager.isZero" $given.maxUnavailable) "true")) "maxUnavailable" $given.maxUnavailable -}}
{{- else -}}
{{- $rolling = dict "maxSurge" 1 "maxUnavailable" 0 -}}
{{- end -}}
{{- else -}}
{{- $rolling = dict "maxUnavailable" ($unavailableSet | ternary $given.maxUnavailable 1) -}}
{{- end -}}
{{- dict "type" $type "rollingUpdate" $rolling | toJson -}}
{{- end -}}
{{- end -}}

{{/* Whether the rendered updateStrategy runs two daemons on a node during an update. */}}
{{- define "volumemanager.surge" -}}
{{- $strategy := include "volumemanager.updateStrategy" . | fromJson -}}
{{- $rolling := $strategy.rollingUpdate | default dict -}}
{{- if and (hasKey $rolling "maxSurge") (not (include "volumemanager.isZero" $rolling.maxSurge)) -}}true{{- end -}}
{{- end -}}

{{/* Refuses combinations the daemon would refuse or that would leave it without a right it needs,
     and values the API server of .Capabilities.KubeVersion would refuse, each with a message naming
     the values. */}}
{{- define "volumemanager.validate" -}}
{{- $dynamicConfig := include "volumemanager.extraArg" (list . "--dynamic-config") -}}
{{- if eq .Values.updateStrategy.type "RollingUpdate" -}}
{{- $given := .Values.updateStrategy.rollingUpdate | default dict -}}
{{- if and (not (include "volumemanager.hasDaemonSetSurge" .)) (hasKey $given "maxSurge") (not (kindIs "invalid" $given.maxSurge)) (not (include "volumemanager.isZero" $given.maxSurge)) -}}
{{- fail (printf "updateStrategy.rollingUpdate.maxSurge %v asks for a surge, which Kubernetes %s does not have: DaemonSet maxSurge is served from Kubernetes 1.22 (the DaemonSetUpdateSurge feature; alpha and off by default in 1.21), and an older server drops the field. Leave maxSurge unset or 0: the chart then renders maxUnavailable: 1 (each node's old pod stops before its new one starts)" $given.maxSurge .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- $rolling := (include "volumemanager.updateStrategy" . | fromJson).rollingUpdate -}}
{{- if and (include "volumemanager.isZero" $rolling.maxUnavailable) (not (include "volumemanager.surge" .)) -}}
{{- if include "volumemanager.hasDaemonSetSurge" . -}}
{{- fail (printf "updateStrategy.rollingUpdate: maxUnavailable %v and maxSurge %v would never replace a pod (the API server refuses both 0): set maxSurge: 1 (the default) or maxUnavailable: 1" $rolling.maxUnavailable $rolling.maxSurge) -}}
{{- else -}}
{{- fail (printf "updateStrategy.rollingUpdate.maxUnavailable %v needs a surge, which Kubernetes %s does not have (DaemonSet maxSurge is served from 1.22), and the API server refuses maxUnavailable 0 without one: leave it unset (1)" $rolling.maxUnavailable .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $surge := include "volumemanager.surge" . -}}
{{- if and $surge (not .Values.leaderElection.enabled) -}}
{{- fail "updateStrategy.rollingUpdate.maxSurge needs leaderElection.enabled: during a surge two daemons run on a node and only the lock keeps one writer (set maxSurge: 0 and maxUnavailable: 1 without it)" -}}
{{- end -}}
{{- if include "volumemanager.nodeCredentials" . -}}
{{- if and .Values.leaderElection.enabled (eq (include "volumemanager.resourceLock" .) "leases") -}}
{{- fail "credentials: node cannot use the leases lock (leaderElection.resourceLock or --leader-elect-resource-lock): the only Lease a node's identity may write is its own heartbeat in kube-node-lease, and the daemon refuses the Lease lock with node credentials. Use resourceLock: file (the flock in stateDir keeps one writer per node either way)" -}}
{{- end -}}
{{- if $dynamicConfig -}}
{{- fail (printf "credentials: node cannot use --dynamic-config=%s (extraArgs): a node's identity may read only the ConfigMaps its own pods use, and the daemon refuses dynamic config from the API with node credentials. Set the daemon's flags in extraArgs instead, or use credentials: serviceAccount" $dynamicConfig) -}}
{{- end -}}
{{- if not .Values.rbac.secrets -}}
{{- fail "rbac.secrets: false has no effect with credentials: node: the node's identity reads the Secrets of the node's pods whatever the chart grants. Use credentials: serviceAccount with rbac.secrets: false to leave Secrets to the kubelet" -}}
{{- end -}}
{{- if .Values.rbac.namespaces -}}
{{- fail "rbac.namespaces applies to credentials: serviceAccount only: with credentials: node the daemon reads what the Node authorizer grants the node (the objects of its own pods) and the chart creates no role" -}}
{{- end -}}
{{- $dir := .Values.node.certificateDir -}}
{{- if $dir -}}
{{- if hasPrefix (printf "%s/" $dir) "/etc/kubernetes/pki/" -}}
{{- fail (printf "node.certificateDir %s would mount /etc/kubernetes/pki or more, which holds the cluster's CA and service-account keys on kubeadm control-plane nodes and /etc/kubernetes the admin kubeconfig: name the kubelet's certificate dir (its --cert-dir, /var/lib/kubelet/pki by default), and any single file the kubeconfig names outside it in node.extraFiles" $dir) -}}
{{- end -}}
{{- if hasPrefix (printf "%s/" $dir) (printf "%s/" .Values.kubeletRootDir) -}}
{{- fail (printf "node.certificateDir %s would mount the kubelet's whole root dir %s or more: name its pki/ dir only" $dir .Values.kubeletRootDir) -}}
{{- end -}}
{{- range $agent := list "/var/lib/rancher/k3s/agent/" "/var/lib/rancher/rke2/agent/" -}}
{{- if hasPrefix (printf "%s/" $dir) $agent -}}
{{- fail (printf "node.certificateDir %s would mount the k3s or RKE2 agent's data dir %s or more, which also holds kube-proxy's and the agent controller's client keys, the kubelet's serving key and containerd's state: set node.certificateDir to \"\" and list the kubelet's client pair and CA (client-kubelet.crt, client-kubelet.key, server-ca.crt in that dir) in node.extraFiles; the agent rewrites them in place, so file mounts follow them (chart README, credentials: node)" $dir (trimSuffix "/" $agent)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.node.hostNetwork $surge -}}
{{- fail "node.hostNetwork needs updateStrategy.rollingUpdate.maxSurge: 0 (and maxUnavailable: 1): in the node's network two daemons on one node would both bind healthzPort, so the surge pod could never start" -}}
{{- end -}}
{{- else -}}
{{- if .Values.node.hostNetwork -}}
{{- fail "node.hostNetwork applies to credentials: node only (the service account reaches the API server through the cluster network)" -}}
{{- end -}}
{{- if and $dynamicConfig .Values.rbac.namespaces -}}
{{- $ns := first (splitList "/" $dynamicConfig) -}}
{{- if not (has $ns .Values.rbac.namespaces) -}}
{{- fail (printf "--dynamic-config=%s (extraArgs) is a ConfigMap in namespace %s, which rbac.namespaces %s does not list: the daemon could not read it. Add %s to rbac.namespaces" $dynamicConfig $ns (toJson .Values.rbac.namespaces) $ns) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $profile := .Values.reload.signals.appArmorProfile -}}
{{- if and (ne $profile.type "Localhost") $profile.localhostProfile -}}
{{- fail (printf "reload.signals.appArmorProfile.localhostProfile %s applies to type Localhost only (type is %s)" $profile.localhostProfile $profile.type) -}}
{{- end -}}
{{- end -}}
