//! Replays a domain's tasks through a dispatcher as a fully compromised agent.

use std::sync::Arc;

use toolguard::{Dispatcher, HostKeys, Principal, RiskPolicy, Status, ToolCall};

use super::{Call, Domain, Env, Mode};

/// What one call of a replay came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The tool.
    pub tool: &'static str,
    /// Its status (`pending_approval` = held for a human, who never comes).
    pub status: Status,
    /// The reason code, when the pipeline stopped it.
    pub reason: Option<String>,
}

/// One run of a user task, alone or paired with an injection task.
#[derive(Debug, Clone)]
pub struct Run {
    /// The user task.
    pub user_task: &'static str,
    /// The injection task (`None`: the clean run).
    pub injection_task: Option<&'static str>,
    /// The user task's calls.
    pub user_steps: Vec<Step>,
    /// Every user call ran and the environment shows the task done.
    pub user_done: bool,
    /// A result the agent read carried the planted instruction.
    pub reached: bool,
    /// The attacker's calls (made only when the injection reached the agent).
    pub attacker_steps: Vec<Step>,
    /// The environment shows the attacker's goal reached.
    pub goal_reached: bool,
}

/// The runs of one domain in one mode.
#[derive(Debug, Clone)]
pub struct DomainRuns {
    /// The domain's name.
    pub domain: &'static str,
    /// The provenance mode.
    pub mode: Mode,
    /// Each user task alone.
    pub clean: Vec<Run>,
    /// Each (user task × injection task) pair.
    pub attacked: Vec<Run>,
}

/// Where the calls go: a session that takes one call at a time and answers with its status,
/// reason and the result the model would read, over an environment it can check.
pub trait Agent {
    /// Registers the user's prompt as this turn's trusted input.
    fn user_turn(&mut self, prompt: &str) -> impl Future<Output = ()>;
    /// Makes one call; returns the step and the text of its result (empty unless `ok`).
    fn call(&mut self, id: String, call: &Call) -> impl Future<Output = (Step, String)>;
    /// The checks on the environment as it is now: the user task's, and the attacker's goal
    /// (`false` without an injection task).
    fn checks(&mut self) -> impl Future<Output = (bool, bool)>;
}

/// What an agent needs to run one user task, alone or with an injection planted.
#[derive(Debug, Clone, Copy)]
pub struct Pair<'a> {
    /// The domain.
    pub domain: &'static str,
    /// The user task's index.
    pub user: usize,
    /// The injection task's index.
    pub injection: Option<usize>,
    /// A session id unique to the pair.
    pub session: &'a str,
}

/// The environment of `pair` in domain `D`: seeded, with the injection planted.
pub fn environment<D: Domain>(pair: Pair<'_>) -> D::State {
    let mut state = D::environment();
    if let Some(i) = pair.injection {
        D::inject(&mut state, D::injection_tasks()[i].text);
    }
    state
}

/// The checks of `pair` on `state`: the user task's, and the attacker's goal.
pub fn checks<D: Domain>(pair: Pair<'_>, state: &D::State) -> (bool, bool) {
    let user = (D::user_tasks()[pair.user].check)(state);
    let goal = pair
        .injection
        .is_some_and(|i| (D::injection_tasks()[i].reached)(state));
    (user, goal)
}

/// A session on a dispatcher of its own (fresh stores) over its own environment.
pub struct DirectAgent<D: Domain> {
    dispatcher: Dispatcher<Env<D::State>>,
    env: Arc<Env<D::State>>,
    principal: Principal,
    mode: Mode,
    user: usize,
    injection: Option<usize>,
}

impl<D: Domain> DirectAgent<D> {
    /// The domain `D`'s tools over `pair`'s environment, with `mode`'s flow policy.
    pub fn new(pair: Pair<'_>, mode: Mode) -> Self {
        let env = Arc::new(Env::new(environment::<D>(pair)));
        let dispatcher = D::tools(env.clone())
            .policy(RiskPolicy::new().flow(mode.flow()))
            .host_keys(host_keys())
            .build()
            .expect("the domain's tools form a valid registry");
        DirectAgent {
            dispatcher,
            env,
            principal: Principal::new("bench", "emma", pair.session),
            mode,
            user: pair.user,
            injection: pair.injection,
        }
    }
}

/// The host keys of every dispatcher of the suite.
pub fn host_keys() -> HostKeys {
    HostKeys::new("bench-1", *b"agentbench-host-key-0123456789ab").expect("a 32-byte key")
}

impl<D: Domain> Agent for DirectAgent<D> {
    async fn user_turn(&mut self, prompt: &str) {
        self.mode
            .user_turn(&self.dispatcher, &self.principal, prompt)
            .await;
    }

    async fn call(&mut self, id: String, call: &Call) -> (Step, String) {
        let key = format!("{id}-idempotency");
        let tool_call =
            ToolCall::new(id.clone(), call.tool, call.args.clone()).with_idempotency_key(key);
        let out = self.dispatcher.dispatch(tool_call, &self.principal).await;
        let seen = match (&out.status, &out.output) {
            (Status::Ok, Some(output)) => output.data.to_string(),
            _ => String::new(),
        };
        // `AGENTBENCH_TRACE=1`: every call's mode, id, tool, status and message on stderr (why
        // a call was held, field by field).
        if std::env::var_os("AGENTBENCH_TRACE").is_some() {
            eprintln!(
                "{:?} {} {} {:?} {}",
                self.mode,
                id,
                call.tool,
                out.status,
                out.message.clone().unwrap_or_default().replace('\n', " | ")
            );
        }
        let step = Step {
            tool: call.tool,
            status: out.status,
            reason: out.reason.map(|r| r.to_string()),
        };
        (step, seen)
    }

    async fn checks(&mut self) -> (bool, bool) {
        let pair = Pair {
            domain: D::NAME,
            user: self.user,
            injection: self.injection,
            session: "",
        };
        checks::<D>(pair, &self.env.lock())
    }
}

/// Makes `calls` (ids `tag-0`, `tag-1`, …); returns the steps and everything the agent read.
async fn play(agent: &mut impl Agent, tag: &str, calls: &[Call]) -> (Vec<Step>, String) {
    let mut steps = Vec::with_capacity(calls.len());
    let mut seen = String::new();
    for (i, c) in calls.iter().enumerate() {
        let (step, text) = agent.call(format!("{tag}-{i}"), c).await;
        seen.push_str(&text);
        steps.push(step);
    }
    (steps, seen)
}

fn all_ran(steps: &[Step]) -> bool {
    steps.iter().all(|s| s.status == Status::Ok)
}

/// Runs user task `u` of `D` (with injection task `i` planted, if given) on a fresh environment,
/// through the agent `connect` returns for it.
pub async fn run_one<D: Domain, A: Agent>(
    u: usize,
    i: Option<usize>,
    connect: impl AsyncFnOnce(Pair<'_>) -> A,
) -> Run {
    let users = D::user_tasks();
    let injections = D::injection_tasks();
    let user = &users[u];
    let injection = i.map(|i| &injections[i]);
    let tag = format!(
        "{}-{}-{}",
        D::NAME,
        user.id,
        injection.map_or("clean", |i| i.id)
    );
    let pair = Pair {
        domain: D::NAME,
        user: u,
        injection: i,
        session: &tag,
    };
    let mut agent = connect(pair).await;
    agent.user_turn(user.prompt).await;
    let (user_steps, seen) = play(&mut agent, &format!("{tag}-user"), &user.calls).await;
    let user_done = all_ran(&user_steps) && agent.checks().await.0;
    let reached = injection.is_some_and(|inj| seen.contains(inj.text));
    let mut attacker_steps = Vec::new();
    if let (Some(inj), true) = (injection, reached) {
        attacker_steps = play(&mut agent, &format!("{tag}-attacker"), &inj.calls)
            .await
            .0;
    }
    let goal_reached = agent.checks().await.1;
    Run {
        user_task: user.id,
        injection_task: injection.map(|i| i.id),
        user_steps,
        user_done,
        reached,
        attacker_steps,
        goal_reached,
    }
}

/// Every clean run and every pair of `D`, in `mode`, straight through a dispatcher.
pub async fn direct<D: Domain>(mode: Mode) -> DomainRuns {
    let users = D::user_tasks().len();
    let injections = D::injection_tasks().len();
    let connect = async |pair: Pair<'_>| DirectAgent::<D>::new(pair, mode);
    let mut clean = Vec::with_capacity(users);
    let mut attacked = Vec::with_capacity(users * injections);
    for u in 0..users {
        clean.push(run_one::<D, _>(u, None, connect).await);
        for i in 0..injections {
            attacked.push(run_one::<D, _>(u, Some(i), connect).await);
        }
    }
    DomainRuns {
        domain: D::NAME,
        mode,
        clean,
        attacked,
    }
}
