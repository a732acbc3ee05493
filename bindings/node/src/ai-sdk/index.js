// convo/ai-sdk — Vercel AI SDK chat persistence (UIMessage arrays) in convo threads:
// loadChat, saveChat, listChats and the chat's title / activeStreamId. Imports nothing of
// the SDK (`ai`, an optional peer): its messages are plain JSON.
export { loadChat, loadChatState, saveChat, saveChatMeta, loadChatMeta, listChats, previewOf } from './chat.js';
