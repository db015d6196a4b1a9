//! The Agent Client Protocol's client terminals (feature `acp`): an agent
//! built on shellvisor runs its commands in the editor's terminal.
//!
//! [`AcpTerminals`] implements [`ClientTerminals`]
//! with ACP v1's client-side `terminal/create`, `terminal/output`,
//! `terminal/wait_for_exit`, `terminal/kill` and `terminal/release`, sent on
//! the agent's connection to its client (`agent_client_protocol`, pinned to
//! 5.2). Install it with
//! [`RuntimeBuilder::client_terminals`](crate::RuntimeBuilder::client_terminals),
//! and only when the client's `initialize` advertised
//! `clientCapabilities.terminal`.

use agent_client_protocol::Client;
use agent_client_protocol::JsonRpcRequest;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::CreateTerminalRequest;
use agent_client_protocol::v1::schema::EnvVariable;
use agent_client_protocol::v1::schema::KillTerminalRequest;
use agent_client_protocol::v1::schema::ReleaseTerminalRequest;
use agent_client_protocol::v1::schema::SessionId;
use agent_client_protocol::v1::schema::TerminalExitStatus;
use agent_client_protocol::v1::schema::TerminalOutputRequest;
use agent_client_protocol::v1::schema::WaitForTerminalExitRequest;
use shellvisor_run::ClientCommand;
use shellvisor_run::ClientExit;
use shellvisor_run::ClientOutput;
use shellvisor_run::ClientTerminals;
use shellvisor_run::TerminalFuture;

/// Terminals of one ACP session of the client, reached over the agent's
/// connection to it.
#[derive(Clone, Debug)]
pub struct AcpTerminals {
    connection: ConnectionTo<Client>,
    session: SessionId,
}

impl AcpTerminals {
    /// Terminals in the client's session `session_id`, over `connection`
    /// (the agent's connection to its client).
    pub fn new(connection: ConnectionTo<Client>, session_id: impl Into<String>) -> Self {
        AcpTerminals {
            connection,
            session: SessionId::new(session_id.into()),
        }
    }
}

impl AcpTerminals {
    /// Sends `request` to the client and waits for its answer.
    async fn ask<R: JsonRpcRequest>(&self, request: R) -> Result<R::Response, String> {
        self.connection
            .send_request(request)
            .block_task()
            .await
            .map_err(|err| err.to_string())
    }
}

fn exit_of(status: TerminalExitStatus) -> ClientExit {
    ClientExit {
        exit_code: status.exit_code,
        signal: status.signal,
    }
}

impl ClientTerminals for AcpTerminals {
    fn create(&self, command: ClientCommand) -> TerminalFuture<'_, String> {
        Box::pin(async move {
            let env = command
                .env
                .into_iter()
                .map(|(name, value)| EnvVariable::new(name, value))
                .collect();
            let request = CreateTerminalRequest::new(self.session.clone(), command.command)
                .args(command.args)
                .env(env)
                .cwd(command.cwd)
                .output_byte_limit(command.output_byte_limit);
            let created = self.ask(request).await?;
            Ok(created.terminal_id.to_string())
        })
    }

    fn output<'a>(&'a self, terminal: &'a str) -> TerminalFuture<'a, ClientOutput> {
        Box::pin(async move {
            let request = TerminalOutputRequest::new(self.session.clone(), terminal.to_owned());
            let output = self.ask(request).await?;
            Ok(ClientOutput {
                output: output.output,
                truncated: output.truncated,
                exit: output.exit_status.map(exit_of),
            })
        })
    }

    fn wait_for_exit<'a>(&'a self, terminal: &'a str) -> TerminalFuture<'a, ClientExit> {
        Box::pin(async move {
            let request =
                WaitForTerminalExitRequest::new(self.session.clone(), terminal.to_owned());
            let exit = self.ask(request).await?;
            Ok(exit_of(exit.exit_status))
        })
    }

    fn kill<'a>(&'a self, terminal: &'a str) -> TerminalFuture<'a, ()> {
        Box::pin(async move {
            let request = KillTerminalRequest::new(self.session.clone(), terminal.to_owned());
            self.ask(request).await.map(|_| ())
        })
    }

    fn release<'a>(&'a self, terminal: &'a str) -> TerminalFuture<'a, ()> {
        Box::pin(async move {
            let request = ReleaseTerminalRequest::new(self.session.clone(), terminal.to_owned());
            self.ask(request).await.map(|_| ())
        })
    }
}
