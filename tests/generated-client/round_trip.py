"""Drives a real `occ dev` through a client generated from its own /openapi.json by
openapi-python-client (scripts/generated-client.sh generates the `occ_client` package first):
create a Configuration and an Agent, deploy it, wait for the deployment, write a workspace file
and read it back. Every call goes through the generated functions and models, so a document
that misdescribes a request or a response fails here.

Usage: round_trip.py BASE_URL SERVICE_KEY_FILE
"""

import json
import sys
import time
import uuid

from occ_client import AuthenticatedClient
from occ_client.api.agents import (
    create_agent,
    deploy_agent,
    get_agent_deployment,
    get_agent_workspace_file,
    put_agent_workspace_file,
)
from occ_client.api.configurations import create_configuration
from occ_client.api.namespaces import list_namespaces
from occ_client.models import (
    AgentCreateBody,
    AgentCreateBodyHarnessAuthRuntime,
    AgentCreateBodyHarnessAuthRuntimeMethod,
    ConfigurationCreateBody,
    ConfigurationCreateBodyKind,
    ConfigurationCreateBodyValues,
    DataAgentView,
    DataConfigurationView,
    DataDeploymentView,
    DataRevisionView,
    DataVecNamespaceView,
    DataWorkspaceFileView,
    DataWorkspaceFileWritten,
    ErrorBody,
    WorkspaceFileBody,
)

# A deploy takes well under a minute on an idle machine; a loaded one needs more.
DEPLOY_TIMEOUT_S = 300


def expect(response, status, model):
    """The response has `status` and its body parsed into the generated `model`."""
    body = response.content.decode(errors="replace")
    if response.status_code != status or not isinstance(response.parsed, model):
        sys.exit(f"expected {status} {model.__name__}, got {response.status_code}: {body}")
    return response.parsed


def configuration(values):
    return ConfigurationCreateBody(
        kind=ConfigurationCreateBodyKind.AGENT,
        values=ConfigurationCreateBodyValues.from_dict(values),
    )


def main(base_url, key_file):
    with open(key_file) as f:
        key = json.load(f)["data"]["key"]
    client = AuthenticatedClient(
        base_url=base_url, token=key, prefix="", auth_header_name="x-api-key", timeout=60.0
    )
    with client:
        namespaces = expect(list_namespaces.sync_detailed(client=client), 200, DataVecNamespaceView)
        ns = next(n.id for n in namespaces.data if n.name == "default")

        document = {"agents": {"defaults": {"model": {"primary": "openai/gpt-5"}}}}
        # a refusal parses into the generated error model, pointer and all
        refused = expect(
            create_configuration.sync_detailed(
                ns, client=client, body=configuration({"gateway": {"mode": "lo\u0000cal"}})
            ),
            400,
            ErrorBody,
        )
        assert [(d.path, d.code) for d in refused.error.details] == [
            ("/values/gateway/mode", "INVALID_VALUE")
        ], refused

        created = expect(
            create_configuration.sync_detailed(ns, client=client, body=configuration(document)),
            201,
            DataConfigurationView,
        ).data
        assert created.generation == 1 and created.values.to_dict() == document, created

        agent = expect(
            create_agent.sync_detailed(
                ns,
                client=client,
                body=AgentCreateBody(
                    name=f"generated-{uuid.uuid4().hex[:8]}",
                    configuration_id=created.id,
                    harness_auth=AgentCreateBodyHarnessAuthRuntime(
                        method=AgentCreateBodyHarnessAuthRuntimeMethod.RUNTIME
                    ),
                ),
            ),
            201,
            DataAgentView,
        ).data

        revision = expect(deploy_agent.sync_detailed(ns, agent.id, client=client), 202, DataRevisionView).data
        deploying = time.monotonic()
        deadline = time.monotonic() + DEPLOY_TIMEOUT_S
        while True:
            deployment = expect(
                get_agent_deployment.sync_detailed(ns, agent.id, revision.id, client=client),
                200,
                DataDeploymentView,
            ).data
            if deployment.status not in ("queued", "running"):
                break
            if time.monotonic() > deadline:
                sys.exit(f"the deployment did not settle within {DEPLOY_TIMEOUT_S} s: {deployment}")
            time.sleep(0.5)
        assert deployment.status == "succeeded", deployment.to_dict()
        print(f"deployed in {time.monotonic() - deploying:.1f} s")

        edited = "# Agents\n\nWritten by the generated client. é ✓\n"
        written = expect(
            put_agent_workspace_file.sync_detailed(
                ns, agent.id, "AGENTS.md", client=client, body=WorkspaceFileBody(content=edited)
            ),
            200,
            DataWorkspaceFileWritten,
        ).data
        assert (written.name, written.size) == ("AGENTS.md", len(edited.encode())), written
        read = expect(
            get_agent_workspace_file.sync_detailed(ns, agent.id, "AGENTS.md", client=client),
            200,
            DataWorkspaceFileView,
        ).data
        assert read.content == edited, read
    print(f"round trip: Configuration {created.id}, Agent {agent.id}, revision {revision.id}")


if __name__ == "__main__":
    main(*sys.argv[1:])
