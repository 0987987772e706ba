/** The support agent's tools (the order feeds the tools' schema hash every run pins: keep it). */
import type { ServiceOptions } from '../../../core/http.js';
import type { Tool } from '../../../core/tool.js';
import { createTicketTool } from './createTicket.js';
import { lookupCustomerTool } from './lookupCustomer.js';
import { readTicket } from './readTicket.js';
import { refundTool } from './refund.js';
import { searchKbTool } from './searchKb.js';
import { sendEmailTool } from './sendEmail.js';

/** Each tool built with the service it calls (`SANDBOX_URL` in src/config/config.ts). */
export function createSupportTools(service: ServiceOptions): Tool[] {
  return [readTicket, lookupCustomerTool(service), searchKbTool(service), createTicketTool(service), sendEmailTool(service), refundTool(service)];
}
