// validation.spec.mjs — @langchain/langgraph-checkpoint-validation's suite, unmodified,
// against ConvoSaver on the store named by CONVO_VALIDATE_URL (run by vitest from
// tests/node.sh once per driver), plus its opt-in delta-channel cases.
import { validate, deltaChannelHistoryTests } from '@langchain/langgraph-checkpoint-validation';
import { initializer } from './initializer.mjs';

validate(initializer);
deltaChannelHistoryTests(initializer);
