// Runs one state machine execution with aws-local-stepfunctions. Started
// by runner.go as `node runner.mjs` with NW_SFN_MODULE naming the package's
// ESM entry point; reads {definition, input, context, waitTimeOverrides,
// retryIntervalOverrides} as JSON on stdin and writes {status, output,
// error, cause, events} as JSON on stdout. Task states call Lambda through
// the AWS SDK, which honours AWS_ENDPOINT_URL_LAMBDA.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const req = JSON.parse(readFileSync(0, 'utf8'));
const { StateMachine } = await import(pathToFileURL(process.env.NW_SFN_MODULE).href);

let machine;
try {
  machine = new StateMachine(req.definition, { validationOptions: { checkPaths: true, checkArn: true } });
} catch (e) {
  process.stdout.write(JSON.stringify({ status: 'INVALID', error: e.name || 'Error', cause: String(e.message || e), events: [] }));
  process.exit(0);
}

const execution = machine.run(req.input, {
  context: req.context,
  overrides: {
    waitTimeOverrides: req.waitTimeOverrides || {},
    retryIntervalOverrides: req.retryIntervalOverrides || {},
  },
});
const events = [];
const collecting = (async () => {
  for await (const e of execution.eventLogs) {
    events.push(e);
  }
})();

let result;
try {
  result = { status: 'SUCCEEDED', output: await execution.result };
} catch (e) {
  result = { status: e.name === 'ExecutionTimeoutError' ? 'TIMED_OUT' : 'FAILED', error: e.name || 'Error', cause: String(e.message || e) };
}
await collecting;
const failed = events.find((e) => e.type === 'ExecutionFailed');
if (failed) {
  result.error = failed.Error;
  result.cause = typeof failed.Cause === 'string' ? failed.Cause : JSON.stringify(failed.Cause);
}
process.stdout.write(JSON.stringify({ ...result, events }));
