{{/*
Names are fixed, as in manifests/: guardhook's commands (audit, uninstall, certs) and its metrics
look for the Deployment, Service, ConfigMap and webhook configurations named guardhook, and the
webhook entries' names are the policies' (*.guardhook.io). One release per cluster.
*/}}

{{/* Labels on every object: the kustomize ones plus Helm's standard ones. */}}
{{- define "guardhook.labels" -}}
app.kubernetes.io/name: guardhook
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The webhook pods' selector (the Service, the PDB, anti-affinity, NetworkPolicy). */}}
{{- define "guardhook.selectorLabels" -}}
app.kubernetes.io/name: guardhook
{{- end }}

{{- define "guardhook.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- end }}

{{- define "guardhook.replicas" -}}
{{- if kindIs "invalid" .Values.replicas }}{{ ternary 2 1 .Values.ha.enabled }}{{ else }}{{ .Values.replicas }}{{ end }}
{{- end }}

{{/* components/ha in force: ha.enabled with more than one replica. One replica surges instead and
     gets no PDB (a PDB with maxUnavailable 1 would let a drain evict the only pod). Prints "true" or "". */}}
{{- define "guardhook.ha" -}}
{{- if and .Values.ha.enabled (gt (include "guardhook.replicas" . | int) 1) }}true{{ end }}
{{- end }}

{{/* Python for the chart's pods that send guardhook one review through its Service (the
     startup check, `helm test`), with `namespace` set before it: `send_review(context, name,
     user, timeout)` POSTs to /validate a dry-run DELETE of the pod `name`, which no LWS owns (so
     it is allowed and records nothing), by `user` (a ServiceAccount of the namespace), and returns
     guardhook's `response`; RuntimeError unless it answered 200 with the review's uid. */}}
{{- define "guardhook.sendReview" -}}
import http.client, json, os, socket, ssl, uuid
class ToService(http.client.HTTPSConnection):
    # the Service's address from the pod's environment (no cluster DNS needed), the TLS name the
    # API server verifies: guardhook.<namespace>.svc
    def connect(self):
        address = os.environ.get("GUARDHOOK_SERVICE_HOST") or self.host
        port = int(os.environ.get("GUARDHOOK_SERVICE_PORT") or 443)
        raw = socket.create_connection((address, port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)
def send_review(context, name, user, timeout):
    uid = str(uuid.uuid4())
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}}
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": name, "namespace": namespace, "operation": "DELETE",
        "userInfo": {"username": "system:serviceaccount:" + namespace + ":" + user},
        "object": None, "oldObject": pod, "dryRun": True,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"}}}
    connection = ToService("guardhook." + namespace + ".svc", 443, context=context, timeout=timeout)
    connection.request("POST", "/validate", json.dumps(review), {"Content-Type": "application/json"})
    answer = connection.getresponse()
    body = json.loads(answer.read() or b"{}")
    response = body.get("response") or {}
    if answer.status != 200 or response.get("uid") != uid or "allowed" not in response:
        raise RuntimeError(f"guardhook answered {answer.status}: {body}")
    return response
{{- end }}

{{/* Where the chart's other pods (the uninstall hook Job, the audit CronJob) run: the values
     nodeSelector, tolerations and affinity, and their own priority class; arg: (list $ priorityClassName). */}}
{{- define "guardhook.jobScheduling" -}}
{{- $ := index . 0 -}}
{{- with index . 1 }}
priorityClassName: {{ . }}
{{- end }}
{{- with $.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The ServiceAccount every guardhook pod runs as (and the subject of every binding). */}}
{{- define "guardhook.subject" -}}
- kind: ServiceAccount
  name: guardhook
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/* leader-service judged on /validate (its actions hold no Mutate: components/leader-service-deny)
     rather than pinned on /mutate. Prints "true" or "". */}}
{{- define "guardhook.leaderServiceValidates" -}}
{{- $policy := get .Values.policies "leader-service" | default dict -}}
{{- $actions := get $policy "actions" | default list -}}
{{- if and $actions (not (has "Mutate" $actions)) }}true{{ end }}
{{- end }}

{{/* The guardhook-config file: policies, exemptions and any other key, empty ones left out. */}}
{{- define "guardhook.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- if .Values.policies }}{{ $_ := set $config "policies" .Values.policies }}{{ end -}}
{{- if .Values.exemptions }}{{ $_ := set $config "exemptions" .Values.exemptions }}{{ end -}}
{{- if $config }}{{ toYaml $config }}{{ else }}# Every policy at its default actions (docs/configuration.md).
{{- end }}
{{- end }}

{{/* ---- Webhook entries: the parts every entry shares. ---- */}}

{{/* clientConfig; arg: (list $ "/validate") */}}
{{- define "guardhook.clientConfig" -}}
{{- $ := index . 0 -}}
clientConfig:
  service:
    name: guardhook
    namespace: {{ $.Release.Namespace }}
    path: {{ index . 1 }}
    port: 443
  {{- with (include "guardhook.caBundle" $) }}
  caBundle: {{ . }}
  {{- end }}
{{- end }}

{{/* Namespaces the API server never sends: webhook.excludedNamespaces, the release's own,
     exemptions.namespaces (JSON list). */}}
{{- define "guardhook.excludedNamespaces" -}}
{{- concat .Values.webhook.excludedNamespaces (list .Release.Namespace) (get .Values.exemptions "namespaces" | default list) | uniq | toJson -}}
{{- end }}

{{- define "guardhook.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ include "guardhook.excludedNamespaces" . }}
{{- end }}

{{/* A pod CREATE (group-readiness) is matched on the new pod's labels, which its controller
     wrote; no entry that must see every member uses it (issue 48). */}}
{{- define "guardhook.lwsObjectSelector" -}}
objectSelector:
  matchExpressions:
    - key: leaderworkerset.sigs.k8s.io/name
      operator: Exists
{{- end }}

{{/* Which objects an entry that must see every LWS member is called for: by any
     leaderworkerset.sigs.k8s.io/ label or by its controller ownerReference, never by the name
     label alone, which a tenant may remove (issue 48). A DELETE is also sent for a pod a Job
     (JobSet Jobs, Workload API gangs of Jobs) or a Grove PodClique controls, and for a pod with a
     spec.schedulingGroup.podGroupName (a Workload API gang member, a bare pod too): gang members.
     The request-selecting conditions are also in guardhook/cluster/entry_conditions.py (audit). */}}
{{- define "guardhook.condition.lwsPodDeleteOrRelabel" -}}
- name: lws-pod-delete-or-relabel
  expression: >-
    request.operation == 'DELETE' ?
    (has(oldObject.metadata.labels) &&
    oldObject.metadata.labels.exists(k, k.startsWith('leaderworkerset.sigs.k8s.io/'))) ||
    (has(oldObject.metadata.ownerReferences) && oldObject.metadata.ownerReferences.exists(r,
    has(r.controller) && r.controller && r.kind in ['StatefulSet', 'ReplicaSet', 'Job', 'PodClique'])) ||
    (has(oldObject.spec.schedulingGroup) && has(oldObject.spec.schedulingGroup.podGroupName)) :
    has(oldObject.metadata.labels) && oldObject.metadata.labels.exists(k,
    k.startsWith('leaderworkerset.sigs.k8s.io/') && !(has(object.metadata.labels) &&
    k in object.metadata.labels && object.metadata.labels[k] == oldObject.metadata.labels[k]))
{{- end }}

{{- define "guardhook.condition.lwsPod" -}}
- name: lws-pod
  expression: >-
    (has(object.metadata.labels) &&
    object.metadata.labels.exists(k, k.startsWith('leaderworkerset.sigs.k8s.io/'))) ||
    (has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r,
    has(r.controller) && r.controller && r.kind in ['StatefulSet', 'ReplicaSet']))
{{- end }}

{{- define "guardhook.condition.lwsStatefulSet" -}}
- name: lws-statefulset
  expression: >-
    (has(oldObject.metadata.labels) &&
    oldObject.metadata.labels.exists(k, k.startsWith('leaderworkerset.sigs.k8s.io/'))) ||
    (has(oldObject.metadata.ownerReferences) && oldObject.metadata.ownerReferences.exists(r,
    has(r.controller) && r.controller && r.kind in ['LeaderWorkerSet', 'Pod']))
{{- end }}

{{/* Exempt identities (design.md §2) are skipped before the call. */}}
{{- define "guardhook.condition.notLwsController" -}}
- name: not-lws-controller
  expression: >-
    request.userInfo.username != 'system:serviceaccount:lws-system:lws-controller-manager'
{{- end }}

{{- define "guardhook.condition.notKueueOrKubeSystemOrNode" -}}
- name: not-kueue-controller
  expression: >-
    request.userInfo.username != 'system:serviceaccount:kueue-system:kueue-controller-manager'
- name: not-kube-system-controller
  expression: >-
    !(request.userInfo.username in [
    'system:serviceaccount:kube-system:generic-garbage-collector',
    'system:serviceaccount:kube-system:statefulset-controller',
    'system:serviceaccount:kube-system:pod-garbage-collector',
    'system:serviceaccount:kube-system:namespace-controller',
    'system:serviceaccount:kube-system:node-controller'])
{{ include "guardhook.condition.notANode" . }}
{{- end }}

{{- define "guardhook.condition.notANode" -}}
- name: not-a-node
  expression: >-
    !(request.userInfo.username.startsWith('system:node:') &&
    has(request.userInfo.groups) && 'system:nodes' in request.userInfo.groups)
{{- end }}

{{/* The usual exemptions: the LWS controller, Kueue, the kube-system controllers, kubelets. */}}
{{- define "guardhook.matchConditions" -}}
matchConditions:
{{ include "guardhook.condition.notLwsController" . | indent 2 }}
{{ include "guardhook.condition.notKueueOrKubeSystemOrNode" . | indent 2 }}
{{- end }}

{{/* An entry's failurePolicy and timeoutSeconds: webhook.entries.<name> where set, else the
     defaults the manifests give it; arg: (list $ name failurePolicy timeoutSeconds). */}}
{{- define "guardhook.entryPolicy" -}}
{{- $ := index . 0 -}}
{{- $own := get ($.Values.webhook.entries | default dict) (index . 1) | default dict -}}
failurePolicy: {{ get $own "failurePolicy" | default (index . 2) }}
timeoutSeconds: {{ get $own "timeoutSeconds" | default (index . 3) }}
{{- end }}

{{/* The webhook configurations' annotations: webhook.annotations, and with cert-manager the
     cainjector's, which fills the caBundles from the serving Certificate's secret. */}}
{{- define "guardhook.webhookAnnotations" -}}
{{- $annotations := deepCopy (.Values.webhook.annotations | default dict) -}}
{{- if eq .Values.certs.source "cert-manager" }}
{{- $_ := set $annotations "cert-manager.io/inject-ca-from" (printf "%s/guardhook-serving" .Release.Namespace) -}}
{{- end }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* ---- certs.source=self-signed ---- */}}

{{/* Makes (or reads back) the CA and serving certificate once per render and keeps them in
     .Values.generatedCerts_, so the Secret and every caBundle carry the same ones:
       {ca: <base64 bundle>, crt: <base64>, key: <base64>, notAfter: <unix seconds>}.
     The Secret already in the cluster is kept unless it expires within renewBeforeDays; a new CA
     then comes first in the bundle and the previous one stays after it (as `guardhook certs
     --force` does), so API servers trust the old and the new serving certificate while the kubelet
     updates the mounted secret. */}}
{{- define "guardhook.selfSignedCerts" -}}
{{- if not (hasKey .Values "generatedCerts_") -}}
{{- $cfg := .Values.certs.selfSigned -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace "guardhook-tls" | default dict -}}
{{- $data := get $secret "data" | default dict -}}
{{- $notAfter := dig "metadata" "annotations" "guardhook.io/not-after" "0" $secret | atoi -}}
{{- $left := sub $notAfter (now | unixEpoch | atoi) -}}
{{- $complete := and (get $data "ca.crt") (get $data "tls.crt") (get $data "tls.key") -}}
{{- if and $complete (gt (int64 $left) (int64 (mul $cfg.renewBeforeDays 86400))) -}}
{{- $_ := set .Values "generatedCerts_" (dict "ca" (get $data "ca.crt") "crt" (get $data "tls.crt") "key" (get $data "tls.key") "notAfter" $notAfter) -}}
{{- else -}}
{{- $dns := list (printf "guardhook.%s.svc" .Release.Namespace) (printf "guardhook.%s.svc.cluster.local" .Release.Namespace) -}}
{{- $ca := genCA "guardhook-ca" (int $cfg.validityDays) -}}
{{- $cert := genSignedCert (first $dns) nil $dns (int $cfg.validityDays) $ca -}}
{{- $bundle := $ca.Cert | trim -}}
{{- $previous := regexFind "(?s)-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----" (get $data "ca.crt" | default "" | b64dec) -}}
{{- if and $previous (ne $previous $bundle) }}{{ $bundle = printf "%s\n%s" $bundle $previous }}{{ end -}}
{{- $expires := add (now | unixEpoch | atoi) (mul $cfg.validityDays 86400) -}}
{{- $_ := set .Values "generatedCerts_" (dict "ca" (printf "%s\n" $bundle | b64enc) "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) "notAfter" $expires) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The caBundle every webhook entry carries with certs.source=self-signed (cert-manager: none,
     its cainjector writes it). */}}
{{- define "guardhook.caBundle" -}}
{{- if eq .Values.certs.source "self-signed" -}}
{{- include "guardhook.selfSignedCerts" . -}}
{{- .Values.generatedCerts_.ca -}}
{{- end -}}
{{- end }}

{{/* The leader-service entry but its name, on /mutate (Mutate) or /validate (Deny/Warn/Audit);
     arg: (list $ path). */}}
{{- define "guardhook.leaderServiceEntry" -}}
{{- $ := index . 0 -}}
{{ include "guardhook.entryPolicy" (list $ "leader-service" "Ignore" 5) }}
sideEffects: None
matchPolicy: Equivalent
admissionReviewVersions: [v1, v1beta1]
{{ include "guardhook.clientConfig" . }}
rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    resources: [services]
    operations: [CREATE, UPDATE]
    scope: Namespaced
  # Gateway API Inference Extension InferencePools; harmless where the CRDs are not installed.
  - apiGroups: ["inference.networking.k8s.io"]
    apiVersions: ["v1"]
    resources: [inferencepools]
    operations: [CREATE, UPDATE]
    scope: Namespaced
  - apiGroups: ["inference.networking.x-k8s.io"]
    apiVersions: ["v1alpha2"]
    resources: [inferencepools]
    operations: [CREATE, UPDATE]
    scope: Namespaced
{{ include "guardhook.namespaceSelector" $ }}
{{ include "guardhook.matchConditions" $ }}
{{- end }}

{{/* An object of files/monitoring (a copy of manifests/monitoring, checked by tests/test_chart.py),
     in the release's namespace with the chart's labels and the extra ones; arg:
     (list $ "file.yaml" extraLabels). */}}
{{- define "guardhook.monitoringFile" -}}
{{- $ := index . 0 -}}
{{- $obj := $.Files.Get (printf "files/monitoring/%s" (index . 1)) | fromYaml -}}
{{- $labels := merge (dict) (index . 2 | default dict) (include "guardhook.labels" $ | fromYaml) $obj.metadata.labels -}}
{{- $_ := set $obj.metadata "namespace" $.Release.Namespace -}}
{{- $_ := set $obj.metadata "labels" $labels -}}
{{ toYaml $obj }}
{{- end }}

{{/* Seconds in a duration of the schema's form (8760h, 90m, 1h30m, 45s). */}}
{{- define "guardhook.seconds" -}}
{{- $h := regexFind "[0-9]+h" . | trimSuffix "h" | default "0" | atoi -}}
{{- $m := regexFind "[0-9]+m" . | trimSuffix "m" | default "0" | atoi -}}
{{- $s := regexFind "[0-9]+s" . | trimSuffix "s" | default "0" | atoi -}}
{{- add (mul $h 3600) (mul $m 60) $s -}}
{{- end }}

{{/* ---- Rules across values that values.schema.json cannot say: each a `fail` with one line. ---- */}}
{{- define "guardhook.validate" -}}
{{- $policies := .Values.policies | default dict -}}
{{- /* One release per cluster (the names are fixed): on install or upgrade against a cluster,
     another release's (or a kustomize install's) webhook configuration fails the render. */ -}}
{{- with lookup "admissionregistration.k8s.io/v1" "ValidatingWebhookConfiguration" "" "guardhook" -}}
{{- $owner := dig "metadata" "annotations" "meta.helm.sh/release-name" "" . -}}
{{- $ownerNamespace := dig "metadata" "annotations" "meta.helm.sh/release-namespace" "" . -}}
{{- if or (ne $owner $.Release.Name) (ne $ownerNamespace $.Release.Namespace) -}}
{{- $by := ternary (printf "by the Helm release %s in namespace %s" $owner $ownerNamespace) "without Helm (kubectl apply -k manifests/)" (ne $owner "") -}}
{{- fail (printf "guardhook is already installed in this cluster %s: one release per cluster (its names are fixed); upgrade that one, or uninstall it first (docs/operations.md: Uninstall)" $by) -}}
{{- end -}}
{{- end -}}
{{- /* The release's namespace is left out of every webhook (guardhook's own pods must start while
     it is down): in `default`, that namespace's workloads would be unguarded without a word. */ -}}
{{- if eq .Release.Namespace "default" -}}
{{- fail "the release namespace is default, which guardhook leaves out of every webhook (its own pods must start while it is down), so the workloads there would be unguarded: install into a namespace of its own (helm install guardhook charts/guardhook -n guardhook-system --create-namespace)" -}}
{{- end -}}
{{- if eq .Values.certs.source "self-managed" -}}
{{- $sm := .Values.certs.selfManaged -}}
{{- $renew := include "guardhook.seconds" $sm.renewBefore | atoi -}}
{{- range $key := list "validity" "caValidity" -}}
{{- if ge $renew (include "guardhook.seconds" (get $sm $key) | atoi) -}}
{{- fail (printf "certs.selfManaged.renewBefore (%s) must be less than certs.selfManaged.%s (%s): the certificates would be replaced at every round" $sm.renewBefore $key (get $sm $key)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* Each port value and the serve flag it becomes: serve refuses any two the same. */ -}}
{{- $ports := list (list "webhook" "--port") (list "metrics" "--metrics-port") (list "health" "--health-port") -}}
{{- range $at, $a := $ports -}}
{{- $port := int (get $.Values.ports (first $a)) -}}
{{- range $b := slice $ports (add1 $at) -}}
{{- if eq $port (int (get $.Values.ports (first $b))) -}}
{{- fail (printf "ports.%s and ports.%s must differ (both %d): guardhook serve refuses to start with %s and %s the same" (first $a) (first $b) $port (last $a) (last $b)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (get $policies "group-readiness") (not .Values.components.groupReadiness.enabled) -}}
{{- fail "policies.group-readiness is set but components.groupReadiness.enabled is false: no webhook entry would call group-readiness (enable the component or drop the setting)" -}}
{{- end -}}
{{- end }}
